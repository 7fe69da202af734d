package remote

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The lists a relist asks for every second (ListPodSandbox,
// ListContainers) hold mostly what the last list held. The Client keeps
// the last complete list's items and decodes only the items that are new
// or changed; an unchanged item is the message returned before. On a node
// with a hundred pods, decoding the items' labels and annotations maps was
// most of a relist's CPU.
//
// "Unchanged" is decided on the item's encoding with its map entries
// sorted: containerd 1.6 and 2 both write a map's entries in Go's random
// map order, so the same item rarely comes twice in the same bytes.
// Runtimes write each key once; an item with a key written twice could
// decode to either value, and is decoded each time.

// listed is what a listCache keeps of one item.
type listed[T proto.Message] struct {
	id  string
	key []byte // the item's encoding with its map entries sorted
	msg T
}

// listCache is the decoded items of the last complete list (no filter),
// by ID. Lists with a filter use it and leave it as it is, so it holds
// what the runtime held at the last complete list and no more.
type listCache[T proto.Message] struct {
	mu      sync.Mutex
	items   map[string]listed[T]
	new     func() T
	maps    map[protowire.Number]bool // the item's map fields
	key     []byte                    // scratch for an item's key
	entries []mapEntry                // scratch for its map entries
}

func newListCache[T proto.Message](newT func() T) *listCache[T] {
	c := &listCache[T]{items: map[string]listed[T]{}, new: newT, maps: map[protowire.Number]bool{}}
	fields := newT().ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.IsMap() {
			c.maps[f.Number()] = true
		}
	}
	return c
}

// decode decodes a list response (its items are field 1, each with its ID
// as field 1). complete says the list had no filter: the cache is then
// replaced by its items.
func (c *listCache[T]) decode(data []byte, complete bool) ([]T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]T, 0, len(c.items))
	var next map[string]listed[T]
	if complete {
		next = make(map[string]listed[T], len(c.items))
	}
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		data = data[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, data)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			data = data[n:]
			continue
		}
		raw, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		data = data[n:]
		id, unique, err := c.itemKey(raw)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", len(out), err)
		}
		it, ok := c.items[string(id)]
		if !ok || !unique || !bytes.Equal(it.key, c.key) {
			msg := c.new()
			if err := proto.Unmarshal(raw, msg); err != nil {
				return nil, fmt.Errorf("item %d (%q): %w", len(out), id, err)
			}
			it = listed[T]{id: string(id), msg: msg}
			if unique {
				it.key = bytes.Clone(c.key)
			}
		}
		if complete {
			next[it.id] = it
		}
		out = append(out, it.msg)
	}
	if complete {
		c.items = next
	}
	return out, nil
}

// itemKey reads an encoded item: its ID (the string in field 1, the ID of
// a PodSandbox and of a Container; the last one when it repeats, as a
// decoder takes it) and, into c.key, its encoding with the entries of its
// map fields sorted by field and key. unique is false when a map field has
// a key twice: such an item is not to be matched by its key.
func (c *listCache[T]) itemKey(raw []byte) (id []byte, unique bool, err error) {
	var idb []byte
	c.key, c.entries = c.key[:0], c.entries[:0]
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return nil, false, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, raw[n:])
		if m < 0 {
			return nil, false, protowire.ParseError(m)
		}
		field := raw[:n+m]
		raw = raw[n+m:]
		if typ != protowire.BytesType {
			c.key = append(c.key, field...)
			continue
		}
		v, _ := protowire.ConsumeBytes(field[n:])
		switch {
		case num == 1:
			idb = v
			c.key = append(c.key, field...)
		case c.maps[num]:
			k, err := entryKey(v)
			if err != nil {
				return nil, false, fmt.Errorf("field %d: %w", num, err)
			}
			c.entries = append(c.entries, mapEntry{num: num, key: k, field: field})
		default:
			c.key = append(c.key, field...)
		}
	}
	slices.SortFunc(c.entries, func(a, b mapEntry) int {
		if a.num != b.num {
			return cmp.Compare(a.num, b.num)
		}
		if k := bytes.Compare(a.key, b.key); k != 0 {
			return k
		}
		return bytes.Compare(a.field, b.field)
	})
	unique = true
	for i, e := range c.entries {
		if i > 0 && e.num == c.entries[i-1].num && bytes.Equal(e.key, c.entries[i-1].key) {
			unique = false
		}
		c.key = append(c.key, e.field...)
	}
	return idb, unique, nil
}

// mapEntry is one encoded entry of a map field.
type mapEntry struct {
	num   protowire.Number
	key   []byte
	field []byte // tag, length and entry
}

// entryKey is the key (field 1) of an encoded map entry, empty when it
// has none.
func entryKey(entry []byte) ([]byte, error) {
	var key []byte
	for len(entry) > 0 {
		num, typ, n := protowire.ConsumeTag(entry)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, entry[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		if num == 1 {
			key = entry[n : n+m]
		}
		entry = entry[n+m:]
	}
	return key, nil
}

// listResponse is the response of a list call decoded through a listCache.
type listResponse[T proto.Message] struct {
	cache    *listCache[T]
	complete bool
	items    []T
}

func (r *listResponse[T]) decode(data []byte) (err error) {
	r.items, err = r.cache.decode(data, r.complete)
	return err
}

// listDecoder is a response that decodes itself.
type listDecoder interface{ decode(data []byte) error }

// listCodec is the proto codec for the list calls: requests as proto
// does, responses that are listDecoders by their decode.
type listCodec struct{ proto encoding.CodecV2 }

func (c listCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c listCodec) Unmarshal(data mem.BufferSlice, v any) error {
	d, ok := v.(listDecoder)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return d.decode(buf.ReadOnlyData())
}

func (c listCodec) Name() string { return c.proto.Name() }

func newSandboxCache() *listCache[*runtimeapi.PodSandbox] {
	return newListCache(func() *runtimeapi.PodSandbox { return new(runtimeapi.PodSandbox) })
}

func newContainerCache() *listCache[*runtimeapi.Container] {
	return newListCache(func() *runtimeapi.Container { return new(runtimeapi.Container) })
}
