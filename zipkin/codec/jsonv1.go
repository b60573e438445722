package codec

import "github.com/sqlpool/sqlpool/zipkin/model"

type v1Annotation struct {
	ts       int64
	value    string
	endpoint *model.Endpoint
}

type v1State struct {
	annotations []v1Annotation
}
