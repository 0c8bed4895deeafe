package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

// One size limit runs from the HTTP front to the child: the front admits a
// message (an A2A message, measured as encoding/json writes it) of at most
// the service's message limit, and the control frame limit is that plus
// PayloadEnvelope, so the spawn payload that carries the message (its
// objective, its delegation's seed) always fits in the child's first frame.
// The supervisor tells each child the frame limit in EnvMaxFrame.
const (
	// DefaultMaxMessage is the default message size limit: 4 MiB.
	DefaultMaxMessage = 4 << 20
	// PayloadEnvelope is the room a spawn payload takes beyond the message
	// it carries: the contract's other fields, limits, scope and tool
	// specs, telemetry, the intelligence settings. 1 MiB.
	PayloadEnvelope = 1 << 20
	// DefaultMaxFrame is the default size limit of one control frame's
	// body: FrameLimit(DefaultMaxMessage), 5 MiB.
	DefaultMaxFrame = DefaultMaxMessage + PayloadEnvelope
)

// FrameLimit returns the control frame size limit for a message size limit:
// maxMessage plus PayloadEnvelope (DefaultMaxFrame when maxMessage <= 0).
func FrameLimit(maxMessage int) int {
	if maxMessage <= 0 {
		return DefaultMaxFrame
	}
	return maxMessage + PayloadEnvelope
}

// MaxFrameFromEnv returns the frame limit the supervisor set in EnvMaxFrame
// for a child, or 0 (the default) when it is unset or not a positive number.
func MaxFrameFromEnv() int {
	n, err := strconv.Atoi(os.Getenv(EnvMaxFrame))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// Frame is one JSON-RPC 2.0 object on the control channel: a request (Method and
// ID), a notification (Method, no ID) or a response (ID and Result or Error).
// IDs on the control channel are positive integers; 0 means "no id".
type Frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      uint64          `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC 2.0 error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// IsResponse reports whether f answers a request.
func (f *Frame) IsResponse() bool { return f.Method == "" }

// Sentinel errors of the frame codec. A read that fails with either is a
// protocol violation by the peer.
var (
	ErrFrameTooLarge = errors.New("api: control frame over the size limit")
	ErrFrameInvalid  = errors.New("api: control frame is not a valid JSON-RPC 2.0 object")
)

// NewFrame builds a request or notification frame with params marshalled from v.
func NewFrame(method string, id uint64, v any) (*Frame, error) {
	f := &Frame{JSONRPC: "2.0", ID: id, Method: method}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("marshal %s params: %w", method, err)
		}
		f.Params = b
	}
	return f, nil
}

// NewResponse builds a response frame with result marshalled from v.
func NewResponse(id uint64, v any) (*Frame, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal response: %w", err)
	}
	return &Frame{JSONRPC: "2.0", ID: id, Result: b}, nil
}

// CodeRefused is the error code of a control request the supervisor declines
// (a blob over its cap, a full store); the message says why.
const CodeRefused = -32000

// NewErrorResponse builds an error response frame.
func NewErrorResponse(id uint64, code int, message string) *Frame {
	return &Frame{JSONRPC: "2.0", ID: id, Error: &RPCError{Code: code, Message: message}}
}

// validate checks the JSON-RPC 2.0 shape: version, and exactly one of a method
// or a result/error; a response needs an id and exactly one of result or error.
func (f *Frame) validate() error {
	if f.JSONRPC != "2.0" {
		return fmt.Errorf("%w: jsonrpc must be \"2.0\"", ErrFrameInvalid)
	}
	if f.Method != "" {
		if f.Result != nil || f.Error != nil {
			return fmt.Errorf("%w: a request carries no result or error", ErrFrameInvalid)
		}
		return nil
	}
	if f.ID == 0 {
		return fmt.Errorf("%w: neither a method nor a response id", ErrFrameInvalid)
	}
	if (f.Result == nil) == (f.Error == nil) {
		return fmt.Errorf("%w: a response carries exactly one of result or error", ErrFrameInvalid)
	}
	return nil
}

// EncodeFrame returns f as one length-prefixed frame: a 4-byte big-endian length
// followed by the JSON body.
func EncodeFrame(f *Frame) ([]byte, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode frame: %w", err)
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	return buf, nil
}

// FrameWriter writes frames to one control pipe. It is safe for concurrent use:
// each frame is written with a single Write under a lock, so frames never
// interleave. The zero value is not usable; use NewFrameWriter.
type FrameWriter struct {
	mu  sync.Mutex // guards w
	w   io.Writer
	max int
}

// NewFrameWriter returns a writer that refuses frames larger than max bytes
// (DefaultMaxFrame when max <= 0).
func NewFrameWriter(w io.Writer, max int) *FrameWriter {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &FrameWriter{w: w, max: max}
}

// Write encodes and writes one frame.
func (fw *FrameWriter) Write(f *Frame) error {
	if err := f.validate(); err != nil {
		return err
	}
	buf := frameBufs.get()
	defer frameBufs.put(buf)
	buf.Write(noLength[:])
	if err := json.NewEncoder(buf).Encode(f); err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return fw.writeBuf(buf)
}

// Send builds a frame from method, id and params and writes it. It encodes
// the frame straight into one buffer: params are marshalled once, not
// marshalled into a RawMessage and then compacted and copied again.
func (fw *FrameWriter) Send(method string, id uint64, params any) error {
	if method == "" {
		return fw.Write(&Frame{JSONRPC: "2.0", ID: id}) // refused: neither a method nor a result
	}
	buf := frameBufs.get()
	defer frameBufs.put(buf)
	buf.Write(noLength[:])
	if err := encodeSend(buf, method, id, params); err != nil {
		return err
	}
	return fw.writeBuf(buf)
}

// encodeSend appends the frame Send writes for method, id and params to buf.
func encodeSend(buf *bytes.Buffer, method string, id uint64, params any) error {
	buf.WriteString(`{"jsonrpc":"2.0"`)
	if id != 0 {
		buf.WriteString(`,"id":`)
		buf.Write(strconv.AppendUint(buf.AvailableBuffer(), id, 10))
	}
	buf.WriteString(`,"method":`)
	if plainString(method) {
		buf.WriteByte('"')
		buf.WriteString(method)
		buf.WriteByte('"')
	} else if err := appendJSON(buf, method); err != nil {
		return err
	}
	if params != nil {
		buf.WriteString(`,"params":`)
		if err := appendJSON(buf, params); err != nil {
			return fmt.Errorf("marshal %s params: %w", method, err)
		}
	}
	buf.WriteByte('}')
	return nil
}

// FrameSize returns the size of the body of the frame Send would write for
// method, id and params, without writing it: a caller checks a frame
// against a limit before committing anything to it. The params are encoded
// into a counter, not a buffer: a spawn payload's objective (tens of KB) left
// no garbage for every subagent admitted.
func FrameSize(method string, id uint64, params any) (int, error) {
	buf := frameBufs.get()
	defer frameBufs.put(buf)
	if err := encodeSend(buf, method, id, nil); err != nil {
		return 0, err
	}
	n := buf.Len()
	if params != nil {
		var c byteCount
		if err := json.NewEncoder(&c).Encode(params); err != nil {
			return 0, fmt.Errorf("marshal %s params: %w", method, err)
		}
		n += len(`,"params":`) + int(c) - 1 // Encode's newline
	}
	return n, nil
}

// byteCount is an io.Writer that counts what is written to it.
type byteCount int

func (c *byteCount) Write(p []byte) (int, error) {
	*c += byteCount(len(p))
	return len(p), nil
}

// Respond writes a response frame whose result is v, encoded like Send's
// params.
func (fw *FrameWriter) Respond(id uint64, v any) error {
	if id == 0 {
		return fmt.Errorf("%w: a response needs an id", ErrFrameInvalid)
	}
	buf := frameBufs.get()
	defer frameBufs.put(buf)
	buf.Write(noLength[:])
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(strconv.AppendUint(buf.AvailableBuffer(), id, 10))
	buf.WriteString(`,"result":`)
	if err := appendJSON(buf, v); err != nil {
		return fmt.Errorf("marshal response: %w", err)
	}
	buf.WriteByte('}')
	return fw.writeBuf(buf)
}

// writeBuf fills in the length prefix of a frame encoded in buf after four
// placeholder bytes, checks the size limit and writes it with one Write.
func (fw *FrameWriter) writeBuf(buf *bytes.Buffer) error {
	b := buf.Bytes()
	n := len(b) - 4
	if n > fw.max {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, fw.max)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	fw.mu.Lock()
	defer fw.mu.Unlock()
	_, err := fw.w.Write(b)
	return err
}

// WriteParts writes one frame whose body is parts, concatenated: a JSON-RPC
// 2.0 object the caller encoded and vouches for (it is not parsed). It is
// for a frame that carries a large value as it already is (a tool call's
// arguments): the length prefix and each part are written in turn, under
// the lock that keeps frames from interleaving, so that no buffer holds
// the whole frame. A frame over the limit fails with ErrFrameTooLarge and
// writes nothing; a write that fails midway leaves the stream out of sync
// (the channel is then broken anyway).
func (fw *FrameWriter) WriteParts(parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return fmt.Errorf("%w: empty frame", ErrFrameInvalid)
	}
	if n > fw.max {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, fw.max)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(n))
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if _, err := fw.w.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if _, err := fw.w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// plainString reports whether s encodes in JSON as itself between quotes:
// printable ASCII with nothing json.Marshal escapes.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// noLength is the placeholder of a length prefix.
var noLength [4]byte

// appendJSON appends v as json.Marshal encodes it (HTML-escaped, compact).
func appendJSON(buf *bytes.Buffer, v any) error {
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}

// bufPool recycles encoding buffers; a buffer that grew past keepBuf is
// dropped rather than kept.
type bufPool struct{ p sync.Pool }

const keepBuf = 64 << 10

var frameBufs bufPool

func (bp *bufPool) get() *bytes.Buffer {
	if b, ok := bp.p.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func (bp *bufPool) put(b *bytes.Buffer) {
	if b.Cap() <= keepBuf {
		bp.p.Put(b)
	}
}

// FrameReader reads frames from one control pipe. It is not safe for concurrent
// use; one goroutine owns it. It keeps no read buffer: the length prefix and
// then the body are read straight from the pipe, so a channel waiting for its
// next frame (which a live child's mostly is, on either side) holds no
// buffer. A frame costs two reads where a buffer might have taken several
// small frames in one; frames are few (a handful a model step), and a 4 KiB
// buffer kept for each of a supervisor's hundreds of waiting children was 4
// KiB of its heap a child (issue 35).
type FrameReader struct {
	r   io.Reader
	max int
	hdr [4]byte
}

// NewFrameReader returns a reader that refuses frames larger than max bytes
// (DefaultMaxFrame when max <= 0).
func NewFrameReader(r io.Reader, max int) *FrameReader {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &FrameReader{r: r, max: max}
}

// Read returns the next frame. At a clean end of stream between frames it
// returns io.EOF; a stream that ends inside a frame gives io.ErrUnexpectedEOF. A
// frame over the limit fails with ErrFrameTooLarge before its body is read; a
// body that is not one valid JSON-RPC 2.0 object fails with ErrFrameInvalid.
// After ErrFrameTooLarge or ErrFrameInvalid the stream is out of sync and the
// reader must not be used again.
func (fr *FrameReader) Read() (*Frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[:])
	if n == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrFrameInvalid)
	}
	if uint64(n) > uint64(fr.max) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, fr.max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(fr.r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return DecodeFrameBody(body)
}

// DecodeFrameBody parses one frame body (without its length prefix). The
// frame's Params and Result share body's memory rather than copying it: the
// caller must not modify body afterwards (Read allocates each body afresh).
func DecodeFrameBody(body []byte) (*Frame, error) {
	var w struct {
		JSONRPC string    `json:"jsonrpc"`
		ID      uint64    `json:"id,omitempty"`
		Method  string    `json:"method,omitempty"`
		Params  sharedRaw `json:"params,omitempty"`
		Result  sharedRaw `json:"result,omitempty"`
		Error   *RPCError `json:"error,omitempty"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFrameInvalid, err)
	}
	f := &Frame{JSONRPC: w.JSONRPC, ID: w.ID, Method: w.Method, Params: json.RawMessage(w.Params), Result: json.RawMessage(w.Result), Error: w.Error}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// sharedRaw is a json.RawMessage that keeps the decoder's slice of the input
// instead of copying it.
type sharedRaw []byte

func (r *sharedRaw) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}
