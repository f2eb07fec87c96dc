// cmdtable.go: COMMAND, COMMAND INFO and COMMAND DOCS as Redis 7.0: every
// command's flags, ACL categories, tips, key specs and subcommands, and
// its documentation, from commands.json (generated from redis-server
// 7.0.15 by go/cmd/engram-redis/gen-commands.py; RESP3 replies stored as
// tagged nodes, rendered here in the client's protocol: maps and sets
// become arrays in RESP2, as Redis's own do).
//
// Invariants: every registered command has an entry with the arity and
// key positions of its reg call (TestCommandTable); the table is read
// once, at package init, and never changed.
package redis

import (
	_ "embed"
	"encoding/json"
	"strings"
)

//go:embed commands.json
var commandsJSON []byte

// cmdMeta is one command's stored replies.
type cmdMeta struct {
	Info node `json:"info"`
	Docs node `json:"docs"`
}

// node is a tagged RESP3 value: [type, value].
type node struct {
	t     byte
	s     string
	n     int64
	items []node
}

func (nd *node) UnmarshalJSON(b []byte) error {
	var raw [2]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var t string
	if err := json.Unmarshal(raw[0], &t); err != nil || len(t) != 1 {
		return errBadTable
	}
	nd.t = t[0]
	switch nd.t {
	case '*', '%', '~':
		return json.Unmarshal(raw[1], &nd.items)
	case ':':
		return json.Unmarshal(raw[1], &nd.n)
	case '+', '$':
		return json.Unmarshal(raw[1], &nd.s)
	case '_':
		return nil
	}
	return errBadTable
}

type tableError string

func (e tableError) Error() string { return string(e) }

const errBadTable = tableError("engram-redis: commands.json holds an unknown node")

// cmdTable is commands.json, parsed at init (a broken table is a build
// defect: TestCommandTable fails on it; the server then answers COMMAND
// from the dispatch table alone).
var cmdTable = func() map[string]cmdMeta {
	m := map[string]cmdMeta{}
	if err := json.Unmarshal(commandsJSON, &m); err != nil {
		return map[string]cmdMeta{}
	}
	return m
}()

// render writes the node in w's protocol.
func (nd *node) render(w *W) {
	switch nd.t {
	case '*':
		w.Array(len(nd.items))
	case '%':
		w.Map(len(nd.items) / 2)
	case '~':
		w.Set(len(nd.items))
	case ':':
		w.Int(nd.n)
		return
	case '+':
		w.Simple(nd.s)
		return
	case '$':
		w.BulkS(nd.s)
		return
	default:
		w.Null()
		return
	}
	for i := range nd.items {
		nd.items[i].render(w)
	}
}

// commandInfo answers COMMAND / COMMAND INFO: one entry per name, a nil
// for a name the server does not know.
func commandInfo(x *ctx, names []string) error {
	x.w.Array(len(names))
	for _, n := range names {
		c := commands[n]
		meta, ok := cmdTable[n]
		switch {
		case c == nil:
			x.w.Null() // Redis 7.0: a nil bulk for an unknown name
		case ok:
			meta.Info.render(x.w)
		default:
			basicInfo(x.w, c)
		}
	}
	return nil
}

// basicInfo is the entry of a command the table lacks (none today).
func basicInfo(w *W, c *command) {
	w.Array(10)
	w.BulkS(c.name)
	w.Int(int64(c.arity))
	w.Set(1)
	if strings.Contains(c.flags, "w") {
		w.Simple("write")
	} else {
		w.Simple("readonly")
	}
	w.Int(int64(c.first))
	w.Int(int64(c.last))
	w.Int(int64(c.step))
	w.Set(0)
	w.Set(0)
	w.Set(0)
	w.Array(0)
}

// commandDocs answers COMMAND DOCS [name ...]: a map of the known names
// to their docs (all commands without names; unknown names left out).
func commandDocs(x *ctx, names []string) error {
	if len(names) == 0 {
		names = sortedNames()
	}
	var known []string
	for _, n := range names {
		if _, ok := cmdTable[n]; ok && commands[n] != nil {
			known = append(known, n)
		}
	}
	x.w.Map(len(known))
	for _, n := range known {
		x.w.BulkS(n)
		meta := cmdTable[n]
		meta.Docs.render(x.w)
	}
	return nil
}

// flagged is the set of commands whose Redis 7.0 flags hold flag.
func flagged(flag string) map[string]bool {
	out := map[string]bool{}
	for name, meta := range cmdTable {
		if len(meta.Info.items) < 3 {
			continue
		}
		for _, f := range meta.Info.items[2].items {
			if f.s == flag {
				out[name] = true
			}
		}
	}
	return out
}
