package main

import (
	"flag"
	"strconv"
	"time"
)

// durationFlag is a duration flag whose every value, when given, is a
// millisecond (the stores' tick) or more: its errors name the flag, the
// value as typed, and what it wants.
type durationFlag struct {
	name    string
	example string // a value to show, such as 30s
	d       *time.Duration
}

// durationVar defines a duration flag on fs, kept in d, with def as its
// default and example in its errors.
func durationVar(fs *flag.FlagSet, d *time.Duration, name string, def time.Duration, example, usage string) {
	*d = def
	fs.Var(&durationFlag{name: name, example: example, d: d}, name, usage)
}

func (v *durationFlag) String() string {
	if v == nil || v.d == nil {
		return "0s" // flag.PrintDefaults' zero value
	}
	return v.d.String()
}

func (v *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		n, numErr := strconv.ParseFloat(s, 64)
		switch {
		case numErr == nil && n > 0:
			return usagef("--%s %s has no unit: did you mean %ss? (a duration such as %s, 500ms, 1m30s)", v.name, s, s, v.example)
		case numErr == nil:
			return usagef("--%s %s: want a duration of 1ms or more, with its unit, such as %s", v.name, s, v.example)
		}
		return usagef("--%s %q is not a duration: want one such as %s, 500ms, 1m30s", v.name, s, v.example)
	}
	switch {
	case d < 0:
		return usagef("--%s %s is negative: want a duration of 1ms or more, such as %s", v.name, s, v.example)
	case d == 0:
		return usagef("--%s %s is zero: want a duration of 1ms or more, such as %s", v.name, s, v.example)
	case d < time.Millisecond:
		return usagef("--%s %s is below a millisecond, the stores' tick: want 1ms or more, such as %s", v.name, s, v.example)
	}
	*v.d = d
	return nil
}

// checked is a flag's value that keeps, for the command to say, the error
// of a value that could not be set, in words that name the flag, the value
// and what it wants (flag.Parse's own says "invalid value ... parse
// error").
type checked struct {
	flag.Value
	name string
	bad  *error // the first bad value's error, for the command
}

func (c *checked) Set(s string) error {
	err := c.Value.Set(s)
	if err != nil && *c.bad == nil {
		if !isUsage(err) {
			err = usagef("--%s %q: want %s", c.name, s, wanted(c.Value))
		}
		*c.bad = err
	}
	return err
}

func (c *checked) String() string {
	if c == nil || c.Value == nil {
		return ""
	}
	return c.Value.String()
}

// IsBoolFlag keeps a bool flag one that takes no value.
func (c *checked) IsBoolFlag() bool {
	b, ok := c.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wanted says what a flag of v's kind takes.
func wanted(v flag.Value) string {
	g, _ := v.(flag.Getter)
	if g == nil {
		return "another value"
	}
	switch g.Get().(type) {
	case bool:
		return "true or false"
	case int64, int:
		return "a whole number"
	}
	return "another value"
}

// check makes every flag of f say, when its value is bad, which flag,
// which value and what it wants: the error parse then gives.
func (f *flags) check() {
	f.VisitAll(func(fl *flag.Flag) {
		fl.Value = &checked{Value: fl.Value, name: fl.Name, bad: &f.bad}
	})
}

// given reports whether the command line set the flag name.
func (f *flags) given(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// needsValue is the error of a flag at the end of the command line that
// takes a value and has none.
func needsValue(fl *flag.Flag) error {
	v := fl.Value
	if c, ok := v.(*checked); ok {
		v = c.Value
	}
	if d, ok := v.(*durationFlag); ok {
		return usagef("--%s needs a value: a duration such as %s", fl.Name, d.example)
	}
	return usagef("--%s needs a value (leases -h)", fl.Name)
}
