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

package docs_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// codebase is what the product's Go code declares, read with go/ast: the code side of the
// checks that no package can answer at run time (constants are not enumerable).
type codebase struct {
	module string
	// literals are the values of every string literal and constant of the product's code.
	literals map[string]bool
	// exported are the exported top-level names of each package, by package name.
	exported map[string]map[string]bool
	// members are "Type.Name" for the methods and struct fields of the product's types.
	members map[string]bool
	// consts are the string constants of each package, by import path, resolved.
	consts map[string]map[string]string

	pending map[string]map[string]constExpr
}

type constExpr struct {
	expr    ast.Expr
	imports map[string]string // the file's import names → import paths
}

// skipDirs are the top-level directories whose Go files are not the product: the suites (test/),
// tools (hack/) and build outputs; testdata is skipped at any depth.
var skipDirs = map[string]bool{"test": true, "hack": true, "testdata": true, "bin": true, "dist": true}

func readCodebase(root string) (*codebase, error) {
	mod, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	c := &codebase{module: mod, literals: map[string]bool{}, exported: map[string]map[string]bool{},
		members: map[string]bool{}, consts: map[string]map[string]string{}, pending: map[string]map[string]constExpr{}}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != root && (strings.HasPrefix(e.Name(), ".") || (filepath.Dir(path) == root && skipDirs[e.Name()]) ||
				e.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", path, err)
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return fmt.Errorf("package path of %s: %w", path, err)
		}
		c.add(f, mod+"/"+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the product's Go code: %w", err)
	}
	for pkg, names := range c.pending {
		for name := range names {
			if v, ok := c.constValue(pkg, name, 0); ok {
				c.literals[v] = true
			}
		}
	}
	return c, nil
}

func modulePath(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("reading go.mod: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("go.mod names no module")
}

func (c *codebase) add(f *ast.File, pkgPath string) {
	imports := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	exported := c.exported[f.Name.Name]
	if exported == nil {
		exported = map[string]bool{}
		c.exported[f.Name.Name] = exported
	}
	if c.pending[pkgPath] == nil {
		c.pending[pkgPath] = map[string]constExpr{}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
			if v, err := strconv.Unquote(l.Value); err == nil {
				c.literals[v] = true
			}
		}
		return true
	})
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				exported[d.Name.Name] = true
			} else if t := recvType(d.Recv.List[0].Type); t != "" {
				c.members[t+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					exported[s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, field := range st.Fields.List {
							for _, n := range field.Names {
								c.members[s.Name.Name+"."+n.Name] = true
							}
							if len(field.Names) == 0 { // embedded: its name is its type's
								c.members[s.Name.Name+"."+recvType(field.Type)] = true
							}
						}
					}
				case *ast.ValueSpec:
					for i, n := range s.Names {
						exported[n.Name] = true
						if d.Tok == token.CONST && i < len(s.Values) {
							c.pending[pkgPath][n.Name] = constExpr{expr: s.Values[i], imports: imports}
						}
					}
				}
			}
		}
	}
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return ""
}

// declares reports whether some package of the product declares name at its top level.
func (c *codebase) declares(name string) bool {
	for _, names := range c.exported {
		if names[name] {
			return true
		}
	}
	return false
}

// constValue resolves a string constant of the package at pkgPath: literals, other constants of
// the module, and their sums.
func (c *codebase) constValue(pkgPath, name string, depth int) (string, bool) {
	if v, ok := c.consts[pkgPath][name]; ok {
		return v, true
	}
	ce, ok := c.pending[pkgPath][name]
	if !ok || depth > 20 {
		return "", false
	}
	v, ok := c.eval(pkgPath, ce, ce.expr, depth)
	if ok {
		if c.consts[pkgPath] == nil {
			c.consts[pkgPath] = map[string]string{}
		}
		c.consts[pkgPath][name] = v
	}
	return v, ok
}

func (c *codebase) eval(pkgPath string, ce constExpr, e ast.Expr, depth int) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(x.Value)
		return v, err == nil
	case *ast.ParenExpr:
		return c.eval(pkgPath, ce, x.X, depth)
	case *ast.Ident:
		return c.constValue(pkgPath, x.Name, depth+1)
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return c.constValue(ce.imports[id.Name], x.Sel.Name, depth+1)
		}
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			l, lok := c.eval(pkgPath, ce, x.X, depth)
			r, rok := c.eval(pkgPath, ce, x.Y, depth)
			return l + r, lok && rok
		}
	}
	return "", false
}

// constsOf returns the string constants of a package of the module (its path below the module)
// whose names start with prefix.
func (c *codebase) constsOf(dir, prefix string) map[string]string {
	out := map[string]string{}
	pkg := c.module + "/" + dir
	for name := range c.pending[pkg] {
		if strings.HasPrefix(name, prefix) {
			if v, ok := c.constValue(pkg, name, 0); ok {
				out[name] = v
			}
		}
	}
	return out
}

// topLevel returns the entries at the top of the repository that git tracks (files and
// directories), so that build outputs (bin/) are not part of the tree; without git (an exported
// tarball) every entry but .git and bin/.
func topLevel(root string) (dirs, files map[string]bool, err error) {
	dirs, files = map[string]bool{}, map[string]bool{}
	out, gitErr := exec.Command("git", "-C", root, "ls-files").Output()
	if gitErr == nil {
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			if first, _, nested := strings.Cut(line, "/"); nested {
				dirs[first] = true
			} else if line != "" {
				files[line] = true
			}
		}
		return dirs, files, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the repository: %w", err)
	}
	for _, e := range entries {
		switch {
		case e.Name() == ".git" || e.Name() == "bin":
		case e.IsDir():
			dirs[e.Name()] = true
		default:
			files[e.Name()] = true
		}
	}
	return dirs, files, nil
}
