// One Generate stream on gRPC's callback API, so thousands can be in flight without a
// thread each. It timestamps every token-carrying message into a RequestRecord.
#pragma once

#include <functional>
#include <string>

#include "bench/request_record.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda::bench {

struct CallOptions {
  std::string api_key;           // sent as "authorization: Bearer <key>" when not empty
  double request_timeout_s = 0;  // per-request deadline; 0 = none
};

// Sends `api_key` as "authorization: Bearer <key>" on `context`; nothing when it is empty.
void AddApiKey(grpc::ClientContext* context, const std::string& api_key);

// The name of a gRPC status code ("OK", "UNAVAILABLE", ...).
std::string StatusCodeName(grpc::StatusCode code);

// Starts `request` on `stub` and returns at once. `record->send_time` must already be set;
// the rest of `*record` is written as the stream progresses. `done` runs exactly once, on a
// gRPC thread, after the record is final and the call's resources are freed. `stub` and
// `record` must outlive that.
void StartStreamCall(v1::Generation::Stub* stub, const CallOptions& options,
                     const v1::GenerateRequest& request, RequestRecord* record,
                     std::function<void()> done);

}  // namespace pagoda::bench
