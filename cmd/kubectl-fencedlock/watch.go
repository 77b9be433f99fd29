/*
Copyright 2026 The fencedlock Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/cli-runtime/pkg/printers"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// watchLock prints the lock again, as a table row without the header (or as the -o format),
// whenever its Lease or FencedLock changes what it shows, like kubectl get -w, until ctx ends
// or the plugin gets SIGINT or SIGTERM, which end it with success. It watches through informers,
// which list again and resume after the API server closes a watch.
func watchLock(ctx context.Context, o *options, ns, name string, printer printers.ResourcePrinter, wide bool) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for _, obj := range []client.Object{&locksv1alpha1.FencedLock{}, &coordinationv1.Lease{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: poke,
			UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}); err != nil {
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil // interrupted before the first list
	}
	var shown []byte
	gone, header := false, printer == nil
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		var fl locksv1alpha1.FencedLock
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &fl); {
		case apierrors.IsNotFound(err):
			if !gone {
				fmt.Fprintf(o.streams.ErrOut, "FencedLock %s/%s deleted\n", ns, name)
			}
			gone, shown = true, nil
			continue
		case err != nil:
			return err
		}
		gone = false
		out, err := renderLock(ctx, c, &fl, printer, wide)
		if err != nil {
			return err
		}
		if header { // once, before the first row
			if err := printLocks(o.streams.Out, &locksv1alpha1.FencedLockList{}, wide, false, time.Now()); err != nil {
				return err
			}
			header = false
		}
		if !bytes.Equal(out, shown) {
			if _, err := o.streams.Out.Write(out); err != nil {
				return err
			}
			shown = out
		}
	}
}

// renderLock renders fl with its Lease's state as get prints it: the -o format, or the table's
// row without its header.
func renderLock(ctx context.Context, r client.Reader, fl *locksv1alpha1.FencedLock, printer printers.ResourcePrinter,
	wide bool) ([]byte, error) {
	var l coordinationv1.Lease
	if err := r.Get(ctx, client.ObjectKeyFromObject(fl), &l); err == nil {
		if st, err := lease.Read(&l); err == nil {
			showLease(fl, st)
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	var buf bytes.Buffer
	if printer != nil {
		fl.SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind(locksv1alpha1.Kind))
		err := printer.PrintObj(fl, &buf)
		return buf.Bytes(), err
	}
	list := &locksv1alpha1.FencedLockList{Items: []locksv1alpha1.FencedLock{*fl}}
	if err := printLocks(&buf, list, wide, false, time.Now()); err != nil {
		return nil, err
	}
	_, row, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
	return row, nil
}
