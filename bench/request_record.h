// What one measured Generate stream saw; filled by StreamCall, read by ComputeResult.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pagoda::bench {

// Times are seconds on the steady clock (see NowSeconds); only differences matter.
struct RequestRecord {
  double send_time = 0;             // just before the call was started
  double end_time = 0;              // when the stream's final status arrived
  std::vector<double> chunk_times;  // arrival of each message carrying >= 1 token
  std::vector<int> chunk_tokens;    // how many tokens each of those messages carried
  int prompt_tokens = 0;            // the server's usage; the dataset's count if it sent none
  int completion_tokens = 0;        // the server's final usage
  int cached_tokens = 0;            // the server's final usage: prompt tokens from the prefix cache
  std::string status = "OK";        // gRPC status code name, or "ABORTED" for finish "abort"
  std::string error;                // the status message when not OK
  std::string finish_reason;        // "stop", "length" or "abort" from the last message
};

// Seconds on the steady clock.
inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace pagoda::bench
