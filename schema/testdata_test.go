package schema

const orderProto = `syntax = "proto3";
package shop;

message Order {
  int64 id = 1;
  string customer = 2;
  repeated Line lines = 3;
  message Line {
    string sku = 1;
    int32 qty = 2;
  }
}

message Refund {
  int64 order_id = 1;
  string reason = 2;
}
`

const orderJSONSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "customer": {"type": "string"}
  },
  "required": ["id", "customer"],
  "additionalProperties": false
}`
