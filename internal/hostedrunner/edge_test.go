package hostedrunner

// errorBody is the contract's error body (§11.5) as tests read it.
type errorBody struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
	Code      string `json:"code"`
}
