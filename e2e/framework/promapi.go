package framework

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// vectorResponse is the /api/v1/query answer for an instant vector.
type vectorResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"` // [unix seconds, "value"]
		} `json:"result"`
	} `json:"data"`
}

// ParseVectorResponse decodes a Prometheus instant-vector query response.
func ParseVectorResponse(body []byte) ([]Sample, error) {
	var r vectorResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode query response: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query failed: %s", r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query result is a %s, want a vector", r.Data.ResultType)
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, res := range r.Data.Result {
		s, ok := res.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("sample value %v is not a string", res.Value[1])
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("sample value %q: %w", s, err)
		}
		out = append(out, Sample{Labels: res.Metric, Value: v})
	}
	return out, nil
}

// matrixResponse is the /api/v1/query_range answer.
type matrixResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"` // [[unix seconds, "value"], ...]
		} `json:"result"`
	} `json:"data"`
}

// ParseMatrixResponse decodes a Prometheus range-query response.
func ParseMatrixResponse(body []byte) ([]Series, error) {
	var r matrixResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode query_range response: %w", err)
	}
	if r.Status != "success" || r.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("query_range failed: %s (result %s)", r.Error, r.Data.ResultType)
	}
	out := make([]Series, 0, len(r.Data.Result))
	for _, res := range r.Data.Result {
		s := Series{Labels: res.Metric}
		for _, pt := range res.Values {
			ts, ok1 := pt[0].(float64)
			str, ok2 := pt[1].(string)
			v, err := strconv.ParseFloat(str, 64)
			if !ok1 || !ok2 || err != nil {
				return nil, fmt.Errorf("point %v: not [seconds, \"value\"]", pt)
			}
			s.Times = append(s.Times, time.Unix(0, int64(ts*1e9)))
			s.Values = append(s.Values, v)
		}
		out = append(out, s)
	}
	return out, nil
}
