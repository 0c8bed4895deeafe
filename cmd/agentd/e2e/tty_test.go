package e2e

import "regexp"

// regexpChildText matches a child's line forwarded by the supervisor and
// rendered as text: the child logs JSON, the supervisor re-renders it.
var regexpChildText = regexp.MustCompile(`(?m)^time=\S+ level=INFO msg="subagent finished" .*child=true`)
