package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/textgen"
	"github.com/puremetal/puremetal/tokenizer"
)

// An apiError is an error answered in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

// OpenAI's error types.
const (
	invalidRequest = "invalid_request_error"
	serverError    = "server_error"
	rateLimit      = "requests"
)

// invalid returns a 400 error about param (none when "").
func invalid(param, format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, invalidRequest, param, "", format, args...)
}

func newError(status int, typ, param, code, format string, args ...any) *apiError {
	e := &apiError{status: status, Message: fmt.Sprintf(format, args...), Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

// generationErrors maps the errors a generation may end with to their
// HTTP status and OpenAI type and code, the first match by errors.Is
// winning; any other error is a 500.
var generationErrors = []struct {
	err       error
	status    int
	typ, code string
}{
	{textgen.ErrContextLength, http.StatusBadRequest, invalidRequest, "context_length_exceeded"},
	{textgen.ErrInvalid, http.StatusBadRequest, invalidRequest, ""},
	{textgen.ErrNoChatTemplate, http.StatusBadRequest, invalidRequest, ""},
	{tokenizer.ErrTemplate, http.StatusBadRequest, invalidRequest, ""},
	{model.ErrTooLong, http.StatusBadRequest, invalidRequest, "context_length_exceeded"},
	{model.ErrBusy, http.StatusTooManyRequests, rateLimit, "rate_limit_exceeded"},
	{model.ErrClosed, http.StatusServiceUnavailable, serverError, "service_unavailable"},
	{model.ErrInvalidArgument, http.StatusBadRequest, invalidRequest, ""},
}

// generationError returns err in OpenAI's shape; param names the request
// field holding the prompt, which a context-length error is about.
func generationError(err error, param string) *apiError {
	for _, g := range generationErrors {
		if errors.Is(err, g.err) {
			p := ""
			if g.code == "context_length_exceeded" {
				p = param
			}
			return newError(g.status, g.typ, p, g.code, "%v", err)
		}
	}
	return newError(http.StatusInternalServerError, serverError, "", "", "%v", err)
}

// writeError answers with e, a 429 saying when to retry.
func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfter))
	}
	writeJSON(w, e.status, struct {
		Error *apiError `json:"error"`
	}{e})
}
