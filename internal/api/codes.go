package api

// ErrorCodes lists every ErrorCode, in the order they are declared: the
// table each front end's mapping (HTTP status, exit code, Python class,
// E2B status) is checked against. TestErrorCodesComplete keeps it whole.
var ErrorCodes = []ErrorCode{
	CodeBadRequest, CodePathEscape, CodeInvalidConfig, CodeUnauthorized, CodeNotFound, CodeMethodNotAllowed,
	CodeConflict, CodeSessionEnded, CodeNoInstance, CodeGone, CodeBodyTooLarge, CodeQuotaExceeded,
	CodeInternal, CodeUnavailable, CodeTooLarge,
}
