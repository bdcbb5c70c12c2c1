package main

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// mutant is one small change to one file: src[start:end] becomes repl.
type mutant struct {
	ID        int
	File      string // slash-separated, relative to the module root
	Line, Col int
	Op        string
	start     int
	end       int
	repl      string
	Status    string // see the status constants in run.go
	Detail    string // which tests failed, or why it did not compile
}

// sourceFile is a file's text, kept to apply mutants and to quote lines.
type sourceFile struct {
	src []byte
}

// apply returns the mutated text of f.
func (m *mutant) apply(f *sourceFile) []byte {
	return slices.Concat(f.src[:m.start], []byte(m.repl), f.src[m.end:])
}

// lines returns the source line(s) that m changes, before and after, each
// collapsed onto one line.
func (m *mutant) lines(f *sourceFile) (before, after string) {
	lineStart := strings.LastIndexByte(string(f.src[:m.start]), '\n') + 1
	lineEnd := func(text []byte, from int) int {
		if i := strings.IndexByte(string(text[from:]), '\n'); i >= 0 {
			return from + i
		}
		return len(text)
	}
	collapse := func(s []byte) string { return strings.Join(strings.Fields(string(s)), " ") }
	mutated := m.apply(f)
	before = collapse(f.src[lineStart:lineEnd(f.src, m.end)])
	after = collapse(mutated[lineStart:lineEnd(mutated, m.start+len(m.repl))])
	if after == "" {
		after = "(removed)"
	}
	return before, after
}

// generate parses each file and returns its mutants, in file and offset
// order, numbered from 1.
func generate(root string, files []string) ([]*mutant, map[string]*sourceFile, error) {
	fset := token.NewFileSet()
	sources := map[string]*sourceFile{}
	var all []*mutant
	for _, rel := range files {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, nil, err
		}
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		sources[rel] = &sourceFile{src: src}
		g := &generator{fset: fset, file: rel, src: src}
		ast.Inspect(f, g.visit)
		all = append(all, g.out...)
	}
	slices.SortStableFunc(all, func(a, b *mutant) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.start, b.start),
			cmp.Compare(a.end, b.end), cmp.Compare(a.Op, b.Op), cmp.Compare(a.repl, b.repl))
	})
	all = slices.CompactFunc(all, func(a, b *mutant) bool {
		return a.File == b.File && a.start == b.start && a.end == b.end && a.repl == b.repl
	})
	for i, m := range all {
		m.ID = i + 1
	}
	return all, sources, nil
}

// generator collects the mutants of one file.
type generator struct {
	fset *token.FileSet
	file string
	src  []byte
	out  []*mutant
}

// add records that the text from pos to end becomes repl.
func (g *generator) add(pos, end token.Pos, op, repl string) {
	p, e := g.fset.Position(pos), g.fset.Position(end)
	g.out = append(g.out, &mutant{File: g.file, Line: p.Line, Col: p.Column, Op: op,
		start: p.Offset, end: e.Offset, repl: repl})
}

// Comparison mutants: the boundary moves by one, or the answer flips.
var (
	boundary = map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}
	negation = map[token.Token]token.Token{
		token.LSS: token.GEQ, token.LEQ: token.GTR, token.GTR: token.LEQ, token.GEQ: token.LSS,
		token.EQL: token.NEQ, token.NEQ: token.EQL,
	}
)

func (g *generator) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.GenDecl:
		return n.Tok != token.IMPORT
	case *ast.BlockStmt:
		g.drops(n.List)
	case *ast.CaseClause:
		g.drops(n.Body)
	case *ast.CommClause:
		g.drops(n.Body)
	case *ast.IfStmt:
		g.ifStmt(n)
	case *ast.BinaryExpr:
		g.binary(n)
	case *ast.BasicLit:
		g.intLiteral(n)
	case *ast.ReturnStmt:
		for _, r := range n.Results {
			if id, ok := r.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
				g.add(id.Pos(), id.End(), "return-bool", strconv.FormatBool(id.Name != "true"))
			}
		}
	}
	return true
}

// drops removes, one at a time, the statements of a list whose only
// effect is a side effect: an assignment to existing variables, ++ or --,
// or a call whose result is unused.
func (g *generator) drops(list []ast.Stmt) {
	for _, s := range list {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok != token.DEFINE && !allBlank(s.Lhs) {
				g.add(s.Pos(), s.End(), "drop-stmt", "")
			}
		case *ast.IncDecStmt:
			g.add(s.Pos(), s.End(), "drop-stmt", "")
		case *ast.ExprStmt:
			if _, ok := s.X.(*ast.CallExpr); ok {
				g.add(s.Pos(), s.End(), "drop-stmt", "")
			}
		}
	}
}

// allBlank reports whether every expression is the blank identifier.
func allBlank(exprs []ast.Expr) bool {
	for _, e := range exprs {
		if id, ok := e.(*ast.Ident); !ok || id.Name != "_" {
			return false
		}
	}
	return true
}

// ifStmt drops an error check (`if err != nil { ...; return ... }` never
// taken; the condition becomes false, so that err stays used and the
// mutant compiles) and negates conditions that are not a single
// comparison (those get their own comparison mutants).
func (g *generator) ifStmt(s *ast.IfStmt) {
	if isErrCheck(s) {
		g.add(s.Cond.Pos(), s.Cond.End(), "drop-errcheck", "false")
	}
	if be, ok := s.Cond.(*ast.BinaryExpr); ok && negation[be.Op] != token.ILLEGAL {
		return
	}
	if not, ok := s.Cond.(*ast.UnaryExpr); ok && not.Op == token.NOT {
		g.add(s.Cond.Pos(), s.Cond.End(), "if-negate", g.text(not.X))
		return
	}
	switch s.Cond.(type) {
	case *ast.Ident, *ast.CallExpr, *ast.SelectorExpr, *ast.IndexExpr:
		g.add(s.Cond.Pos(), s.Cond.End(), "if-negate", "!"+g.text(s.Cond))
	default:
		g.add(s.Cond.Pos(), s.Cond.End(), "if-negate", "!("+g.text(s.Cond)+")")
	}
}

// isErrCheck reports whether s is `if err != nil { ...; return ... }`.
func isErrCheck(s *ast.IfStmt) bool {
	be, ok := s.Cond.(*ast.BinaryExpr)
	if !ok || be.Op != token.NEQ || s.Else != nil || len(s.Body.List) == 0 {
		return false
	}
	id, ok := be.X.(*ast.Ident)
	isNil, _ := be.Y.(*ast.Ident)
	_, returns := s.Body.List[len(s.Body.List)-1].(*ast.ReturnStmt)
	return ok && isNil != nil && isNil.Name == "nil" && returns &&
		(id.Name == "err" || strings.HasSuffix(id.Name, "Err"))
}

func (g *generator) binary(e *ast.BinaryExpr) {
	opEnd := e.OpPos + token.Pos(len(e.Op.String()))
	if to, ok := boundary[e.Op]; ok {
		g.add(e.OpPos, opEnd, "cmp-boundary", to.String())
	}
	if to, ok := negation[e.Op]; ok {
		g.add(e.OpPos, opEnd, "cmp-negate", to.String())
	}
	switch e.Op {
	case token.LAND:
		g.add(e.OpPos, opEnd, "and-or", "||")
	case token.LOR:
		g.add(e.OpPos, opEnd, "and-or", "&&")
	case token.ADD, token.SUB:
		if lit, ok := e.Y.(*ast.BasicLit); ok && lit.Kind == token.INT && lit.Value == "1" {
			g.add(e.OpPos, opEnd, "plus-minus-one", map[token.Token]string{token.ADD: "-", token.SUB: "+"}[e.Op])
		}
	}
}

// intLiteral turns an integer constant c into c+1 and c-1, in its base.
func (g *generator) intLiteral(lit *ast.BasicLit) {
	if lit.Kind != token.INT {
		return
	}
	c, err := strconv.ParseInt(lit.Value, 0, 64)
	if err != nil {
		return
	}
	format := func(v int64) string {
		lower := strings.ToLower(lit.Value)
		switch {
		case v < 0:
			return fmt.Sprintf("(%d)", v)
		case strings.HasPrefix(lower, "0x"):
			return fmt.Sprintf("0x%x", v)
		case strings.HasPrefix(lower, "0o"):
			return fmt.Sprintf("0o%o", v)
		case strings.HasPrefix(lower, "0b"):
			return fmt.Sprintf("0b%b", v)
		}
		return strconv.FormatInt(v, 10)
	}
	g.add(lit.Pos(), lit.End(), "const-inc", format(c+1))
	g.add(lit.Pos(), lit.End(), "const-dec", format(c-1))
}

// text is the source text of n.
func (g *generator) text(n ast.Node) string {
	return string(g.src[g.fset.Position(n.Pos()).Offset:g.fset.Position(n.End()).Offset])
}
