package web

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/wardenrt/warden/runtime/tool"
)

// A response's body is shown as the text it carries: the content codings
// its Content-Encoding names are undone before it is read (within the same
// 1 MiB cap, counted in decoded bytes), so that redaction reads the text
// and not compressed bytes that would hide a secret from it — and that,
// shown in base64, the model could still decode. The transport asks for
// gzip and undoes its own; the tool undoes what a server sent unasked
// (gzip, deflate, applied up to httpMaxCodings times) and refuses a body
// in any other coding (br, zstd, compress), and a request that asks for
// one itself (Accept-Encoding).

// httpMaxCodings bounds the content codings a body may have been applied.
const httpMaxCodings = 4

// httpMaxWire bounds the encoded bytes read for one body.
const httpMaxWire = 16 << 20

// errWireCap is what a body read past httpMaxWire encoded bytes returns.
var errWireCap = errors.New("the encoded body is larger than 16 MiB")

// wireCap reads at most left bytes of r, then fails with errWireCap.
type wireCap struct {
	r    io.Reader
	left int64
}

func (w *wireCap) Read(p []byte) (int, error) {
	if w.left <= 0 {
		return 0, errWireCap
	}
	if int64(len(p)) > w.left {
		p = p[:w.left]
	}
	n, err := w.r.Read(p)
	w.left -= int64(n)
	return n, err
}

// httpDecoded returns the body of resp as the text it carries, and removes
// Content-Encoding and Content-Length from its header (they described the
// bytes on the wire). The body is read as it is decoded: nothing is read
// here but a coding's header.
func httpDecoded(resp *http.Response) (io.Reader, *tool.Error) {
	var body io.Reader = resp.Body
	var codings []string
	all := strings.Join(resp.Header.Values("Content-Encoding"), ",") // every line
	for _, c := range strings.Split(all, ",") {
		if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
			codings = append(codings, c)
		}
	}
	if len(codings) == 0 {
		return body, nil
	}
	if len(codings) > httpMaxCodings {
		return nil, tool.Errorf(tool.CodeOperationNotSupported, "fetch it uncompressed, or compressed once",
			"the server answered with a body encoded %d times (Content-Encoding %s); warden decodes at most %d", len(codings), all, httpMaxCodings)
	}
	for _, c := range codings {
		if c != "gzip" && c != "x-gzip" && c != "deflate" {
			return nil, tool.Errorf(tool.CodeOperationNotSupported,
				"warden decodes gzip and deflate bodies only (and asks for gzip itself): a body it cannot read is not shown, since redaction could not read it either",
				"the server answered with Content-Encoding %s, which warden does not decode", all)
		}
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	// The cap on the body counts decoded bytes; the bytes read off the wire
	// are capped too (empty gzip members decode to nothing, forever).
	body = &wireCap{r: body, left: httpMaxWire}
	for i := len(codings) - 1; i >= 0; i-- {
		d, err := httpDecoder(codings[i], body)
		if errors.Is(err, io.EOF) {
			return strings.NewReader(""), nil // an empty body (HEAD, 204, 304)
		}
		if err != nil {
			return nil, tool.Errorf(tool.CodeNetworkError, "the server sent a body that is not what its Content-Encoding says; try again, or fetch it uncompressed",
				"the body's %s encoding cannot be read: %v", codings[i], err)
		}
		body = d
	}
	return body, nil
}

// httpDecoder undoes one coding. deflate is zlib's format, as HTTP defines
// it, or the raw deflate some servers send.
func httpDecoder(coding string, r io.Reader) (io.Reader, error) {
	if coding != "deflate" {
		return gzip.NewReader(r)
	}
	br := bufio.NewReader(r)
	h, err := br.Peek(2)
	if len(h) == 0 {
		return nil, err
	}
	if len(h) == 2 && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}
