package server

// The strict pass over a request body.
//
// encoding/json matches object names to struct fields case-insensitively and
// lets the last of two equal names win, so {"method":"tasks/get",
// "Method":"a2a.Tree"} would run a2a.Tree while a proxy that inspects the
// JSON sees tasks/get. Before anything is decoded, the front reads the body
// once with the scanner below (written for this, not a general decoder):
//
//   - the body must be one JSON text (RFC 8259), its strings valid UTF-8;
//     anything else is a parse error (-32700);
//   - in every object, at any depth, no name may appear twice (compared
//     after unescaping, so "\u006dethod" is method); a repeat is refused;
//   - the envelope's members are jsonrpc, method, params and id, spelled
//     exactly: a member that equals one of them only when case is ignored
//     ("Method", "ID") is refused (-32600); other members are ignored, as
//     JSON-RPC 2.0 leaves them undefined;
//   - the params are read against the Go type they decode into (a schema
//     built from its json tags): a name that matches a field only when case
//     is ignored is refused (-32602), as it would set that field. Names no
//     field has are left to the decoder (which ignores them, or refuses
//     them where the method decodes strictly); inside maps (metadata, data
//     parts) any name goes, once. A type that decodes itself (a
//     json.Unmarshaler, such as the A2A 1.0 request types, which match
//     names exactly themselves) is checked for repeats only.
//
// The scanner allocates only for escaped names and for objects with more
// than eight names; its cost is measured by the front's benchmark
// (BenchmarkMessageSend and bench/'s front figure).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
)

// maxJSONDepth is the deepest nesting accepted: encoding/json's own limit.
const maxJSONDepth = 10000

// Kinds of strictError.
const (
	strictSyntax    = iota // not one JSON text
	strictDuplicate        // a name given twice in one object
	strictCase             // a name that matches a known one only when case is ignored
	strictShape            // valid JSON of the wrong shape (a request that is not an object)
)

// strictError is a body or params the strict pass refused: where (path, in
// the JSON names from the top: "params.message.parts[0]"; "" is the top)
// and why.
type strictError struct {
	kind int
	path string
	msg  string
}

func (e *strictError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

// within prefixes the error's path with the segment seg (a name, or an index
// in brackets) of the value that contained it.
func within(err error, seg string) error {
	var se *strictError
	if !errors.As(err, &se) || se.kind == strictSyntax {
		return err
	}
	switch {
	case se.path == "":
		se.path = seg
	case se.path[0] == '[':
		se.path = seg + se.path
	default:
		se.path = seg + "." + se.path
	}
	return se
}

func syntaxErr(off int, format string, args ...any) error {
	return &strictError{kind: strictSyntax, msg: fmt.Sprintf("not valid JSON at offset %d: ", off) + fmt.Sprintf(format, args...)}
}

// Kinds of schema.
const (
	anyValue    = iota // any JSON; names in its objects are unique
	skipValue          // syntax only: it is checked again where it is decoded
	structValue        // an object decoded into a struct: names spelled as its fields are
	mapValue           // an object decoded into a map: unique names, values of elem
	listValue          // an array of elem
)

// schema is what the strict pass knows of a value: how the decoder will read
// it. Schemas are built once per type and shared; they are never modified
// after construction.
type schema struct {
	kind   int
	fields map[string]*schema // structValue: the fields by JSON name
	folded map[string]string  // structValue: a folded name -> the field's JSON name
	elem   *schema            // listValue and mapValue: the elements
}

var (
	anySchema  = &schema{kind: anyValue}
	skipSchema = &schema{kind: skipValue}
)

// structSchema is the schema of an object with these fields.
func structSchema(fields map[string]*schema) *schema {
	s := &schema{kind: structValue, fields: fields, folded: make(map[string]string, len(fields))}
	for name := range fields {
		s.folded[string(foldName([]byte(name)))] = name
	}
	return s
}

// knownSchemas are the a2a-go types that decode themselves, read as their
// decoders read them: a part is an object with a kind (ContentParts picks the
// part type by it), a file part's file is one object holding the fields of
// both file kinds. They are built on first use, not in package init (every
// process, each subagent included, runs the init of every package).
var knownSchemas = sync.OnceValue(func() map[reflect.Type]*schema {
	fileSchema := structSchema(map[string]*schema{"mimeType": anySchema, "name": anySchema, "bytes": anySchema, "uri": anySchema})
	partSchema := structSchema(map[string]*schema{
		"kind": anySchema, "text": anySchema, "data": {kind: mapValue, elem: anySchema},
		"file": fileSchema, "metadata": {kind: mapValue, elem: anySchema},
	})
	return map[reflect.Type]*schema{
		reflect.TypeFor[a2a.ContentParts]():    {kind: listValue, elem: partSchema},
		reflect.TypeFor[a2a.Part]():            partSchema,
		reflect.TypeFor[a2a.FilePart]():        partSchema,
		reflect.TypeFor[a2a.FilePartContent](): fileSchema,
	}
})

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	schemas         sync.Map // reflect.Type -> *schema
)

// schemaOf returns the schema of values decoded into t by encoding/json.
func schemaOf(t reflect.Type) *schema {
	if s, ok := schemas.Load(t); ok {
		return s.(*schema)
	}
	s := buildSchema(t, map[reflect.Type]*schema{})
	schemas.Store(t, s)
	return s
}

// buildSchema builds t's schema; building holds the struct schemas under
// construction, so a recursive type refers to itself.
func buildSchema(t reflect.Type, building map[reflect.Type]*schema) *schema {
	known := knownSchemas()
	if s, ok := known[t]; ok {
		return s
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if s, ok := known[t]; ok {
			return s
		}
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return anySchema // it reads names its own way
	}
	switch t.Kind() {
	case reflect.Struct:
		if s, ok := building[t]; ok {
			return s
		}
		s := &schema{kind: structValue, fields: map[string]*schema{}, folded: map[string]string{}}
		building[t] = s
		addFields(s, t, building)
		for name := range s.fields {
			s.folded[string(foldName([]byte(name)))] = name
		}
		return s
	case reflect.Map:
		return &schema{kind: mapValue, elem: buildSchema(t.Elem(), building)}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return anySchema // []byte: a base64 string
		}
		return &schema{kind: listValue, elem: buildSchema(t.Elem(), building)}
	}
	return anySchema
}

// addFields adds the JSON fields of struct t to s as encoding/json sees them:
// a field named by its tag or its Go name, "-" skipped, an untagged embedded
// struct's fields promoted.
func addFields(s *schema, t reflect.Type, building map[reflect.Type]*schema) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				addFields(s, et, building)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		// The first field to claim a name keeps it: fields in declaration
		// order, an embedded struct's where it is embedded. That is not
		// encoding/json's rule (the shallower field wins, and a name two
		// fields claim at one depth is dropped): when an embedded struct
		// comes before an outer field of the same name, the value is
		// checked against the embedded field's type, not the one it
		// decodes into.
		if _, dup := s.fields[name]; !dup {
			s.fields[name] = buildSchema(ft, building)
		}
	}
}

// foldName folds a name as encoding/json does to match it to a field: ASCII
// letters to upper case, any other rune r to unicode.ToUpper(unicode.ToLower(r)).
func foldName(in []byte) []byte { return appendFolded(nil, in) }

// appendFolded appends in, folded as foldName does, to out.
func appendFolded(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return out
}

// checkJSON runs the strict pass over data, one JSON value read as s says.
func checkJSON(data []byte, s *schema) error {
	sc := scanner{data: data}
	sc.space()
	if err := sc.value(s, 0); err != nil {
		return err
	}
	sc.space()
	if sc.i != len(sc.data) {
		return syntaxErr(sc.i, "data after the top-level value")
	}
	return nil
}

// envelope is a JSON-RPC request's members as spans of the body (nil when
// absent). The spans alias the body: they are valid while it is.
type envelope struct {
	jsonrpc, method, params, id []byte
}

// envelopeMembers are the JSON-RPC request members, by their folded names.
var envelopeMembers = map[string]string{"JSONRPC": "jsonrpc", "METHOD": "method", "PARAMS": "params", "ID": "id"}

// readEnvelope runs the strict pass over a request body and returns its
// members. The params are checked for syntax only here; decodeParams checks
// them against their type.
func readEnvelope(data []byte) (envelope, error) {
	var env envelope
	sc := scanner{data: data}
	sc.space()
	if sc.i >= len(data) {
		return env, syntaxErr(0, "empty body")
	}
	if data[sc.i] != '{' {
		if err := sc.value(anySchema, 0); err != nil {
			return env, err
		}
		return env, &strictError{kind: strictShape, msg: "a request must be a JSON object"}
	}
	sc.i++
	sc.space()
	if sc.i < len(data) && data[sc.i] == '}' {
		sc.i++
		sc.space()
		if sc.i != len(data) {
			return env, syntaxErr(sc.i, "data after the top-level value")
		}
		return env, nil
	}
	var seen keySet
	for {
		key, err := sc.name()
		if err != nil {
			return env, err
		}
		if seen.add(key) {
			return env, &strictError{kind: strictDuplicate, msg: fmt.Sprintf("member %q given twice", key)}
		}
		start := sc.i
		var dst *[]byte
		switch string(key) {
		case "jsonrpc":
			dst = &env.jsonrpc
		case "method":
			dst = &env.method
		case "params":
			dst = &env.params
		case "id":
			dst = &env.id
		default:
			var buf [32]byte
			if want, ok := envelopeMembers[string(appendFolded(buf[:0], key))]; ok {
				return env, &strictError{kind: strictCase, msg: fmt.Sprintf("member %q is not %q: member names are case-sensitive", key, want)}
			}
		}
		vs := anySchema
		if dst == &env.params {
			vs = skipSchema
		}
		if err := sc.value(vs, 1); err != nil {
			return env, within(err, string(key))
		}
		if dst != nil {
			*dst = data[start:sc.i]
		}
		sc.space()
		if sc.i >= len(data) {
			return env, syntaxErr(sc.i, "unterminated object")
		}
		if data[sc.i] == '}' {
			sc.i++
			break
		}
		if data[sc.i] != ',' {
			return env, syntaxErr(sc.i, "want , or } after an object member")
		}
		sc.i++
		sc.space()
	}
	sc.space()
	if sc.i != len(data) {
		return env, syntaxErr(sc.i, "data after the top-level value")
	}
	return env, nil
}

// stringValue decodes raw, a JSON value, as a string.
func stringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// keySet holds the names of one object: the first eight inline, a map past
// that.
type keySet struct {
	small [8][]byte
	n     int
	big   map[string]struct{}
}

// add records name and reports whether it was already there.
func (k *keySet) add(name []byte) bool {
	if k.big != nil {
		if _, ok := k.big[string(name)]; ok {
			return true
		}
		k.big[string(name)] = struct{}{}
		return false
	}
	for i := 0; i < k.n; i++ {
		if bytes.Equal(k.small[i], name) {
			return true
		}
	}
	if k.n < len(k.small) {
		k.small[k.n] = name
		k.n++
		return false
	}
	k.big = make(map[string]struct{}, 2*len(k.small))
	for _, s := range k.small {
		k.big[string(s)] = struct{}{}
	}
	k.big[string(name)] = struct{}{}
	return false
}

// scanner reads one JSON text from data, from i on.
type scanner struct {
	data []byte
	i    int
	fold [32]byte // room for a folded name
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads one value, read as sch says, at nesting depth.
func (s *scanner) value(sch *schema, depth int) error {
	if s.i >= len(s.data) {
		return syntaxErr(s.i, "unexpected end of input")
	}
	switch c := s.data[s.i]; {
	case c == '{':
		if depth >= maxJSONDepth {
			return syntaxErr(s.i, "nested deeper than %d", maxJSONDepth)
		}
		return s.object(sch, depth+1)
	case c == '[':
		if depth >= maxJSONDepth {
			return syntaxErr(s.i, "nested deeper than %d", maxJSONDepth)
		}
		return s.array(sch, depth+1)
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return syntaxErr(s.i, "unexpected %q", s.data[s.i])
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		return syntaxErr(s.i, "want %s", lit)
	}
	s.i += len(lit)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// number reads -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?.
func (s *scanner) number() error {
	start := s.i
	if s.data[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.data) && s.data[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return syntaxErr(start, "bad number")
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return syntaxErr(start, "bad number")
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return syntaxErr(start, "bad number")
		}
	}
	return nil
}

// str reads a string and returns its content between the quotes as it
// stands in data, and whether it holds escapes.
func (s *scanner) str() (content []byte, escaped bool, err error) {
	start := s.i
	s.i++ // the opening quote
	high := false
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			content = s.data[start+1 : s.i]
			s.i++
			if high && !utf8.Valid(content) {
				return nil, false, syntaxErr(start, "a string that is not valid UTF-8")
			}
			return content, escaped, nil
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.data) {
				return nil, false, syntaxErr(s.i, "unterminated string")
			}
			switch s.data[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.data) {
					return nil, false, syntaxErr(s.i, "bad \\u escape")
				}
				for _, h := range s.data[s.i+2 : s.i+6] {
					if !isHex(h) {
						return nil, false, syntaxErr(s.i, "bad \\u escape")
					}
				}
				s.i += 6
			default:
				return nil, false, syntaxErr(s.i, "bad escape")
			}
		case c < 0x20:
			return nil, false, syntaxErr(s.i, "a control character in a string")
		default:
			if c >= utf8.RuneSelf {
				high = true
			}
			s.i++
		}
	}
	return nil, false, syntaxErr(start, "unterminated string")
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// name reads an object member's name and returns it unescaped.
func (s *scanner) name() ([]byte, error) {
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return nil, syntaxErr(s.i, "want a member name")
	}
	start := s.i
	content, escaped, err := s.str()
	if err != nil {
		return nil, err
	}
	if escaped {
		var n string
		if err := json.Unmarshal(s.data[start:s.i], &n); err != nil {
			return nil, syntaxErr(start, "bad member name")
		}
		content = []byte(n)
	}
	s.space()
	if s.i >= len(s.data) || s.data[s.i] != ':' {
		return nil, syntaxErr(s.i, "want : after a member name")
	}
	s.i++
	s.space()
	return content, nil
}

func (s *scanner) object(sch *schema, depth int) error {
	s.i++ // {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	skip := sch.kind == skipValue
	var seen keySet
	for {
		key, err := s.name()
		if err != nil {
			return err
		}
		child := anySchema
		switch {
		case skip:
			child = skipSchema
		case seen.add(key):
			return &strictError{kind: strictDuplicate, path: string(key), msg: "given twice"}
		case sch.kind == structValue:
			if f, ok := sch.fields[string(key)]; ok {
				child = f
			} else if want, ok := sch.folded[string(appendFolded(s.fold[:0], key))]; ok {
				return &strictError{kind: strictCase, msg: fmt.Sprintf("member %q is not %q: member names are case-sensitive", key, want)}
			}
		case sch.kind == mapValue:
			child = sch.elem
		}
		if err := s.value(child, depth); err != nil {
			return within(err, string(key))
		}
		if done, err := s.after('}', "object", "an object member"); done || err != nil {
			return err
		}
	}
}

// after reads what follows a member or an element: the closing byte ends
// the container (done), a comma another member or element follows.
func (s *scanner) after(closing byte, container, what string) (done bool, err error) {
	s.space()
	if s.i >= len(s.data) {
		return false, syntaxErr(s.i, "unterminated %s", container)
	}
	switch s.data[s.i] {
	case closing:
		s.i++
		return true, nil
	case ',':
		s.i++
		s.space()
		return false, nil
	}
	return false, syntaxErr(s.i, "want , or %c after %s", closing, what)
}

func (s *scanner) array(sch *schema, depth int) error {
	s.i++ // [
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	elem := anySchema
	switch sch.kind {
	case skipValue:
		elem = skipSchema
	case listValue:
		elem = sch.elem
	}
	for n := 0; ; n++ {
		if err := s.value(elem, depth); err != nil {
			return within(err, "["+strconv.Itoa(n)+"]")
		}
		if done, err := s.after(']', "array", "an array element"); done || err != nil {
			return err
		}
	}
}
