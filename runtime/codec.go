package runtime

import (
	"errors"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criCodec is gRPC's protobuf codec with a faster decoder for the responses
// a node agent reads most often: ListContainersResponse,
// ContainerStatusResponse and ExecSyncResponse. The fast decoder copies the
// response into one fresh buffer and makes every string of the decoded
// message a view of that buffer (one allocation instead of one per string),
// and fills the generated structs directly instead of through reflection.
// The buffer is never written after the copy, so the strings are immutable
// as Go requires; it stays alive while any of them is referenced. A field the
// decoder does not know, or malformed input, sends the whole message to the
// standard decoder, so the result is always what proto.Unmarshal gives.
type criCodec struct{ std encoding.CodecV2 }

func newCRICodec() criCodec { return criCodec{std: encoding.GetCodecV2("proto")} }

// Name is empty so that requests carry the plain "application/grpc" content
// type, as with gRPC's own protobuf codec, which the runtime decodes as
// protobuf. (A name would be sent as "application/grpc+<name>", built anew
// for every call.)
func (c criCodec) Name() string { return "" }

func (c criCodec) Marshal(v any) (mem.BufferSlice, error) { return c.std.Marshal(v) }

func (c criCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var err error
	switch m := v.(type) {
	case *runtimeapi.ListContainersResponse:
		err = decodeListContainers(data.Materialize(), m)
	case *runtimeapi.ContainerStatusResponse:
		err = decodeContainerStatusResponse(data.Materialize(), m)
	case *runtimeapi.ExecSyncResponse:
		err = decodeExecSync(data.Materialize(), m)
	default:
		return c.std.Unmarshal(data, v)
	}
	if err != nil {
		proto.Reset(v.(proto.Message))
		return c.std.Unmarshal(data, v)
	}
	return nil
}

// errSlowPath sends a message to the standard decoder.
var errSlowPath = errors.New("decode with the standard decoder")

// str returns b as a string without copying; b must never be written again.
// Invalid UTF-8, which the standard decoder rejects in proto3 strings, sets
// *bad so that the message goes to the standard decoder.
func (d *decoder) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if !utf8.Valid(b) {
		d.bad = true
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// decoder holds what a fast decode found wrong.
type decoder struct{ bad bool }

func (d *decoder) result(err error) error {
	if err == nil && d.bad {
		return errSlowPath
	}
	return err
}

// once reports errSlowPath for a sub-message seen twice, which the standard
// decoder would merge.
func once[T any](p *T) error {
	if p != nil {
		return errSlowPath
	}
	return nil
}

// field reads one field's tag and value. For wire type bytes, v is the
// payload; for varint, x is the value. Other wire types are errSlowPath.
func field(b []byte) (num protowire.Number, typ protowire.Type, x uint64, v []byte, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, 0, nil, nil, errSlowPath
	}
	b = b[n:]
	switch typ {
	case protowire.VarintType:
		x, n = protowire.ConsumeVarint(b)
	case protowire.BytesType:
		v, n = protowire.ConsumeBytes(b)
	default:
		return 0, 0, 0, nil, nil, errSlowPath
	}
	if n < 0 {
		return 0, 0, 0, nil, nil, errSlowPath
	}
	return num, typ, x, v, b[n:], nil
}

// decodeFields calls fn for each field of b, stopping at the first error.
func decodeFields(b []byte, fn func(num protowire.Number, typ protowire.Type, x uint64, v []byte) error) error {
	for len(b) > 0 {
		num, typ, x, v, rest, err := field(b)
		if err != nil {
			return err
		}
		if err := fn(num, typ, x, v); err != nil {
			return err
		}
		b = rest
	}
	return nil
}

func wantBytes(typ protowire.Type) error {
	if typ != protowire.BytesType {
		return errSlowPath
	}
	return nil
}

func wantVarint(typ protowire.Type) error {
	if typ != protowire.VarintType {
		return errSlowPath
	}
	return nil
}

// mapEntry decodes a map<string,string> entry into m.
func (d *decoder) mapEntry(b []byte, m map[string]string) error {
	var k, val string
	err := decodeFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, v []byte) error {
		if err := wantBytes(typ); err != nil {
			return err
		}
		switch num {
		case 1:
			k = d.str(v)
		case 2:
			val = d.str(v)
		default:
			return errSlowPath
		}
		return nil
	})
	if err != nil {
		return err
	}
	m[k] = val
	return nil
}

func (d *decoder) addEntry(m *map[string]string, v []byte) error {
	if *m == nil {
		*m = make(map[string]string, 4)
	}
	return d.mapEntry(v, *m)
}

func (d *decoder) decodeContainerMetadata(b []byte) (*runtimeapi.ContainerMetadata, error) {
	md := &runtimeapi.ContainerMetadata{}
	return md, decodeFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) error {
		switch num {
		case 1:
			md.Name = d.str(v)
			return wantBytes(typ)
		case 2:
			md.Attempt = uint32(x)
			return wantVarint(typ)
		}
		return errSlowPath
	})
}

func (d *decoder) decodeImageSpec(b []byte) (*runtimeapi.ImageSpec, error) {
	im := &runtimeapi.ImageSpec{}
	return im, decodeFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, v []byte) error {
		if err := wantBytes(typ); err != nil {
			return err
		}
		switch num {
		case 1:
			im.Image = d.str(v)
		case 2:
			return d.addEntry(&im.Annotations, v)
		case 18:
			im.UserSpecifiedImage = d.str(v)
		case 19:
			im.RuntimeHandler = d.str(v)
		case 20:
			im.ImageRef = d.str(v)
		default:
			return errSlowPath
		}
		return nil
	})
}

func (d *decoder) decodeContainer(b []byte) (*runtimeapi.Container, error) {
	c := &runtimeapi.Container{}
	return c, decodeFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) error {
		var err error
		switch num {
		case 1:
			c.Id = d.str(v)
		case 2:
			c.PodSandboxId = d.str(v)
		case 3:
			if err = once(c.Metadata); err == nil {
				c.Metadata, err = d.decodeContainerMetadata(v)
			}
		case 4:
			if err = once(c.Image); err == nil {
				c.Image, err = d.decodeImageSpec(v)
			}
		case 5:
			c.ImageRef = d.str(v)
		case 6:
			c.State = runtimeapi.ContainerState(int32(x))
			return wantVarint(typ)
		case 7:
			c.CreatedAt = int64(x)
			return wantVarint(typ)
		case 8:
			err = d.addEntry(&c.Labels, v)
		case 9:
			err = d.addEntry(&c.Annotations, v)
		case 10:
			c.ImageId = d.str(v)
		default:
			return errSlowPath
		}
		if err != nil {
			return err
		}
		return wantBytes(typ)
	})
}

func decodeListContainers(b []byte, m *runtimeapi.ListContainersResponse) error {
	// Count the containers first, to allocate the slice once.
	n := 0
	if err := decodeFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, _ []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return errSlowPath
		}
		n++
		return nil
	}); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	m.Containers = make([]*runtimeapi.Container, 0, n)
	var d decoder
	return d.result(decodeFields(b, func(_ protowire.Number, _ protowire.Type, _ uint64, v []byte) error {
		c, err := d.decodeContainer(v)
		if err != nil {
			return err
		}
		m.Containers = append(m.Containers, c)
		return nil
	}))
}

func decodeIDMapping(b []byte) (*runtimeapi.IDMapping, error) {
	idm := &runtimeapi.IDMapping{}
	return idm, decodeFields(b, func(num protowire.Number, typ protowire.Type, x uint64, _ []byte) error {
		if err := wantVarint(typ); err != nil {
			return err
		}
		switch num {
		case 1:
			idm.HostId = uint32(x)
		case 2:
			idm.ContainerId = uint32(x)
		case 3:
			idm.Length = uint32(x)
		default:
			return errSlowPath
		}
		return nil
	})
}

func (d *decoder) decodeMount(b []byte) (*runtimeapi.Mount, error) {
	mt := &runtimeapi.Mount{}
	return mt, decodeFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) error {
		var err error
		switch num {
		case 1:
			mt.ContainerPath = d.str(v)
		case 2:
			mt.HostPath = d.str(v)
		case 3:
			mt.Readonly = x != 0
			return wantVarint(typ)
		case 4:
			mt.SelinuxRelabel = x != 0
			return wantVarint(typ)
		case 5:
			mt.Propagation = runtimeapi.MountPropagation(int32(x))
			return wantVarint(typ)
		case 6, 7:
			var idm *runtimeapi.IDMapping
			if idm, err = decodeIDMapping(v); err == nil {
				if num == 6 {
					mt.UidMappings = append(mt.UidMappings, idm)
				} else {
					mt.GidMappings = append(mt.GidMappings, idm)
				}
			}
		case 8:
			mt.RecursiveReadOnly = x != 0
			return wantVarint(typ)
		case 9:
			if err = once(mt.Image); err == nil {
				mt.Image, err = d.decodeImageSpec(v)
			}
		case 10:
			mt.ImageSubPath = d.str(v)
		case 11:
			mt.MountOptions = append(mt.MountOptions, d.str(v))
		default:
			return errSlowPath
		}
		if err != nil {
			return err
		}
		return wantBytes(typ)
	})
}

// decodeOther decodes a rarely set sub-message with the standard decoder.
func decodeOther[T any, PT interface {
	*T
	proto.Message
}](b []byte) (PT, error) {
	m := PT(new(T))
	if err := (proto.UnmarshalOptions{}).Unmarshal(b, m); err != nil {
		return nil, errSlowPath
	}
	return m, nil
}

func (d *decoder) decodeContainerStatus(b []byte) (*runtimeapi.ContainerStatus, error) {
	s := &runtimeapi.ContainerStatus{}
	return s, decodeFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) error {
		var err error
		switch num {
		case 1:
			s.Id = d.str(v)
		case 2:
			if err = once(s.Metadata); err == nil {
				s.Metadata, err = d.decodeContainerMetadata(v)
			}
		case 3:
			s.State = runtimeapi.ContainerState(int32(x))
			return wantVarint(typ)
		case 4:
			s.CreatedAt = int64(x)
			return wantVarint(typ)
		case 5:
			s.StartedAt = int64(x)
			return wantVarint(typ)
		case 6:
			s.FinishedAt = int64(x)
			return wantVarint(typ)
		case 7:
			s.ExitCode = int32(x)
			return wantVarint(typ)
		case 8:
			if err = once(s.Image); err == nil {
				s.Image, err = d.decodeImageSpec(v)
			}
		case 9:
			s.ImageRef = d.str(v)
		case 10:
			s.Reason = d.str(v)
		case 11:
			s.Message = d.str(v)
		case 12:
			err = d.addEntry(&s.Labels, v)
		case 13:
			err = d.addEntry(&s.Annotations, v)
		case 14:
			var mt *runtimeapi.Mount
			if mt, err = d.decodeMount(v); err == nil {
				s.Mounts = append(s.Mounts, mt)
			}
		case 15:
			s.LogPath = d.str(v)
		case 16:
			if err = once(s.Resources); err == nil {
				s.Resources, err = decodeOther[runtimeapi.ContainerResources](v)
			}
		case 17:
			s.ImageId = d.str(v)
		case 18:
			if err = once(s.User); err == nil {
				s.User, err = decodeOther[runtimeapi.ContainerUser](v)
			}
		case 19:
			s.StopSignal = runtimeapi.Signal(int32(x))
			return wantVarint(typ)
		default:
			return errSlowPath
		}
		if err != nil {
			return err
		}
		return wantBytes(typ)
	})
}

func decodeContainerStatusResponse(b []byte, m *runtimeapi.ContainerStatusResponse) error {
	var d decoder
	return d.result(decodeFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, v []byte) error {
		if err := wantBytes(typ); err != nil {
			return err
		}
		switch num {
		case 1:
			if err := once(m.Status); err != nil {
				return err
			}
			st, err := d.decodeContainerStatus(v)
			m.Status = st
			return err
		case 2:
			return d.addEntry(&m.Info, v)
		}
		return errSlowPath
	}))
}

// decodeExecSync decodes an ExecSyncResponse; its output slices share b,
// which holds nothing else the caller can see.
func decodeExecSync(b []byte, m *runtimeapi.ExecSyncResponse) error {
	return decodeFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) error {
		switch num {
		case 1:
			m.Stdout = v[:len(v):len(v)]
			return wantBytes(typ)
		case 2:
			m.Stderr = v[:len(v):len(v)]
			return wantBytes(typ)
		case 3:
			m.ExitCode = int32(x)
			return wantVarint(typ)
		}
		return errSlowPath
	})
}
