package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// maxBody is the largest request body accepted.
const maxBody = 64 << 10

var errTooLarge = errors.New("request body is larger than 64 KiB")

// decodeBody decodes a JSON object into v, refusing unknown fields,
// trailing data and bodies over maxBody. An empty body decodes as {}.
func decodeBody(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		// curl -d sends its default form type; its body is still our JSON.
		if err != nil || (mt != "application/json" && mt != "application/x-www-form-urlencoded") {
			return fmt.Errorf("Content-Type must be application/json, not %q", ct)
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("reading body: %v", err)
	}
	return decodeJSON(body, v)
}

// decodeJSON is the part of decodeBody that parses outside input; it is
// fuzzed on its own.
func decodeJSON(body []byte, v any) error {
	if len(body) > maxBody {
		return errTooLarge
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("body is not valid JSON at byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			return fmt.Errorf("field %q must be a %s, not a JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("body: %v", err)
	}
	if dec.More() {
		return errors.New("body has data after the JSON object")
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		return errors.New("body has data after the JSON object")
	}
	return nil
}
