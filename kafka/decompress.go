package kafka

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errDecompressLimit is a Produce partition's batches decompressing past
// the Server's max request bytes: MESSAGE_TOO_LARGE.
var errDecompressLimit = errors.New("record batches decompress past the max request bytes")

// xerialPrefix opens a snappy record set framed as the Java client frames
// it: the prefix, two 4-byte versions, then per chunk a 4-byte length and
// a raw snappy block.
var xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}

// decompress returns a batch's records decompressed, refusing
// (errDecompressLimit) more than limit bytes before producing them: a
// request of a few bytes must not make the server allocate gigabytes.
// Gzip, lz4 and zstd stream through a bounded reader; snappy's decoded
// lengths, in its headers, are checked before kgo decodes it.
func decompress(src []byte, codec kgo.CompressionCodecType, limit int64) ([]byte, error) {
	var r io.Reader
	switch codec {
	case kgo.CodecNone:
		if int64(len(src)) > limit {
			return nil, errDecompressLimit
		}
		return src, nil
	case kgo.CodecSnappy:
		total, err := snappyLen(src)
		if err != nil {
			return nil, err
		}
		if total > limit {
			return nil, errDecompressLimit
		}
		return kgo.DefaultDecompressor().Decompress(src, codec)
	case kgo.CodecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		r = zr
	case kgo.CodecLz4:
		r = lz4.NewReader(bytes.NewReader(src))
	case kgo.CodecZstd:
		zr, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(max(limit, 1))))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("compression codec %d", codec)
	}
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, limit+1))
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), err == nil && n > limit:
		return nil, errDecompressLimit
	case err != nil:
		return nil, err
	}
	return out.Bytes(), nil
}

// snappyLen is the decoded length a snappy record set claims: a raw
// block's header, or the sum of an xerial framing's chunks'.
func snappyLen(src []byte) (int64, error) {
	if len(src) <= 16 || !bytes.HasPrefix(src, xerialPrefix) {
		n, err := s2.DecodedLen(src)
		return int64(n), err
	}
	total := int64(0)
	for rem := src[16:]; len(rem) > 0; {
		if len(rem) < 4 {
			return 0, errors.New("malformed xerial framing")
		}
		size := int64(binary.BigEndian.Uint32(rem))
		rem = rem[4:]
		if size > int64(len(rem)) {
			return 0, errors.New("malformed xerial framing")
		}
		n, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return 0, err
		}
		total += int64(n)
		rem = rem[size:]
	}
	return total, nil
}
