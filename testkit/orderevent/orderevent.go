// Package orderevent holds the value schemas of the order event cdc-bench writes
// (tools/internal/bench: insertOrder, and backlogTx without padding), one copy for the
// benchmark's avro and protobuf runs, which register them, and for schema's encode benchmarks,
// so that both measure the same event. It is test support only: nothing in the relay imports it.
//
// # Contexts and goroutines
//
// Constants only; no I/O, no goroutines.
package orderevent

// Avro is the order event's Avro schema.
const Avro = `{"type":"record","name":"OrderCreated","namespace":"bench","fields":[` +
	`{"name":"event","type":"string"},{"name":"order_id","type":"long"},{"name":"customer","type":"string"},` +
	`{"name":"amount","type":"double"},{"name":"currency","type":"string"},` +
	`{"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[` +
	`{"name":"sku","type":"string"},{"name":"qty","type":"long"}]}}}]}`

// Protobuf is the order event's Protobuf schema.
const Protobuf = `syntax = "proto3";
package bench;

message OrderCreated {
  message Item {
    string sku = 1;
    int64 qty = 2;
  }
  string event = 1;
  int64 order_id = 2;
  string customer = 3;
  double amount = 4;
  string currency = 5;
  repeated Item items = 6;
}
`
