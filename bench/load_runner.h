// Sends a list of requests closed loop (at most N in flight) or open loop (on a schedule),
// and collects what each stream saw.
#pragma once

#include <functional>
#include <vector>

#include "bench/progress.h"
#include "bench/request_record.h"
#include "bench/stream_call.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda::bench {

// Starts one measured stream and returns at once (StartStreamCall, StartOpenAiCall): `done`
// runs exactly once after `*record` is final.
using StartCallFn = std::function<void(const CallOptions&, const v1::GenerateRequest&,
                                       RequestRecord*, std::function<void()>)>;

struct LoadOptions {
  int concurrency = 0;  // most requests in flight at once; 0 = unlimited
  // Per request, when to send it, in seconds from the run's start (GammaArrivalTimes);
  // empty = as soon as the concurrency limit allows. A request whose time has come waits
  // for a free slot, and later ones wait behind it.
  std::vector<double> send_offsets;
  double duration_s = 0;  // send nothing new after this long; 0 = no limit
  CallOptions call;
};

struct LoadRun {
  std::vector<RequestRecord> records;  // the requests that were sent, in send order
  double start_time = 0;               // steady-clock seconds, before the first send
  double end_time = 0;                 // after the last stream finished
  int peak_in_flight = 0;              // most streams open at once
};

// Sends `requests` in order and blocks until every sent one has finished; requests left
// when `duration_s` runs out are not sent, those in flight are awaited. `progress` may be
// null. Never fails: a failed stream is a record with a non-OK status.
LoadRun RunLoad(const StartCallFn& start, const std::vector<v1::GenerateRequest>& requests,
                const LoadOptions& options, ProgressReporter* progress);

}  // namespace pagoda::bench
