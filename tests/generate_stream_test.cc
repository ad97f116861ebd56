// GenerateStream, the Generate stream's state machine, against a fake engine and a fake
// transport: the exact states each event sequence passes through, what is written, the
// final status, engine aborts, the unsent-bytes cap and the drain slot.
#include "server/generate_stream.h"

#include <functional>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "gtest/gtest.h"

namespace pagoda::server {
namespace {

using ::testing::ElementsAre;
using S = StreamState;

// Accepts every request as handle 7 ("req-7", 3 prompt tokens) unless told otherwise;
// records aborts. `during_submit` runs inside Submit, before it returns.
class FakeEngine final : public engine::EngineClient {
 public:
  absl::StatusOr<engine::SubmitResult> Submit(engine::GenerationRequest request,
                                              std::shared_ptr<engine::OutputSink> sink) override {
    if (throw_bad_alloc) throw std::bad_alloc();
    if (!refusal.ok()) return refusal;
    requests.push_back(std::move(request));
    this->sink = std::move(sink);
    if (during_submit) during_submit();
    return engine::SubmitResult{.handle = 7, .request_id = "req-7", .prompt_tokens = 3};
  }
  void Abort(engine::RequestHandle handle) override { aborted.push_back(handle); }

  bool throw_bad_alloc = false;
  absl::Status refusal;
  std::function<void()> during_submit;
  std::vector<engine::GenerationRequest> requests;
  std::shared_ptr<engine::OutputSink> sink;
  std::vector<engine::RequestHandle> aborted;
};

// Records writes (parsed) and the final status; writes complete only when the test says.
class FakeTransport final : public StreamTransport {
 public:
  void StartWrite(const grpc::ByteBuffer* message) override {
    EXPECT_FALSE(in_flight) << "two writes in flight";
    EXPECT_FALSE(status.has_value()) << "write after Finish";
    grpc::ByteBuffer copy(*message);
    grpc::ProtoBufferReader reader(&copy);
    v1::GenerateResponse r;
    EXPECT_TRUE(r.ParseFromZeroCopyStream(&reader));
    writes.push_back(std::move(r));
    in_flight = true;
  }
  void Finish(const grpc::Status& s) override {
    EXPECT_FALSE(in_flight) << "Finish with a write in flight";
    EXPECT_FALSE(status.has_value()) << "Finish twice";
    status = s;
  }

  std::vector<v1::GenerateResponse> writes;
  bool in_flight = false;
  std::optional<grpc::Status> status;
};

grpc::ByteBuffer RequestBytes() {
  v1::GenerateRequest r;
  r.set_prompt("Once");
  r.set_max_tokens(8);
  const std::string bytes = r.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

engine::GenerationOutput Chunk(int32_t token, std::string text) {
  engine::GenerationOutput out;
  out.token_ids = {token};
  out.text = std::move(text);
  return out;
}

engine::GenerationOutput Last(engine::FinishReason reason) {
  engine::GenerationOutput out;
  out.finish_reason = reason;
  out.usage.prompt_tokens = 3;
  return out;
}

class GenerateStreamTest : public ::testing::Test {
 protected:
  void Make(int64_t max_unsent_bytes = kDefaultMaxUnsentBytesPerStream) {
    Caller anonymous{.tenant = std::make_shared<Tenant>()};
    stream_ = GenerateStream::Create({.engine = &engine_,
                                      .metrics = &metrics_,
                                      .active_streams = &active_,
                                      .drain = &drain_,
                                      .max_unsent_bytes = max_unsent_bytes},
                                     anonymous, &transport_);
  }
  // Completes the write in flight.
  void WriteDone(bool ok = true) {
    ASSERT_TRUE(transport_.in_flight);
    transport_.in_flight = false;
    stream_->OnWriteDone(ok);
  }
  void Deliver(engine::GenerationOutput out) { engine_.sink->OnOutput(std::move(out)); }
  TenantMetrics& anonymous() { return metrics_.ForTenant(""); }

  FakeEngine engine_;
  FakeTransport transport_;
  ServerMetrics metrics_;
  std::atomic<int64_t> active_{0};
  DrainCounter drain_;
  std::shared_ptr<GenerateStream> stream_;
};

TEST_F(GenerateStreamTest, StreamsMergesWhileAWriteIsInFlightAndFinishesOk) {
  Make();
  EXPECT_EQ(active_.load(), 1);
  stream_->Start(RequestBytes());
  EXPECT_EQ(stream_->state(), S::kStreaming);
  ASSERT_EQ(transport_.writes.size(), 1u);  // the first message: id and prompt tokens
  EXPECT_EQ(transport_.writes[0].request_id(), "req-7");
  EXPECT_EQ(transport_.writes[0].usage().prompt_tokens(), 3);
  Deliver(Chunk(10, "a"));
  Deliver(Chunk(11, "b"));  // folded into the queued chunk: one message
  EXPECT_GT(stream_->unsent_bytes(), 0);
  WriteDone();
  ASSERT_EQ(transport_.writes.size(), 2u);
  EXPECT_THAT(transport_.writes[1].token_ids(), ElementsAre(10, 11));
  EXPECT_EQ(transport_.writes[1].text(), "ab");
  EXPECT_EQ(transport_.writes[1].request_id(), "req-7");
  Deliver(Last(engine::FinishReason::kLength));
  EXPECT_EQ(stream_->state(), S::kFinishing);
  WriteDone();
  ASSERT_EQ(transport_.writes.size(), 3u);
  EXPECT_EQ(transport_.writes[2].finish_reason(), "length");
  EXPECT_FALSE(transport_.status.has_value());
  WriteDone();
  ASSERT_TRUE(transport_.status.has_value());
  EXPECT_TRUE(transport_.status->ok());
  EXPECT_EQ(stream_->unsent_bytes(), 0);
  stream_->OnDone();
  EXPECT_THAT(stream_->history(),
              ElementsAre(S::kStarted, S::kStreaming, S::kFinishing, S::kFinished, S::kDrained));
  EXPECT_EQ(active_.load(), 0);
  EXPECT_TRUE(engine_.aborted.empty());
}

TEST_F(GenerateStreamTest, CancelMidStreamAbortsTheEngineAndFinishesCancelledAfterTheWrite) {
  Make();
  stream_->Start(RequestBytes());
  Deliver(Chunk(10, "a"));
  stream_->OnCancel();
  EXPECT_EQ(stream_->state(), S::kCancelled);
  EXPECT_THAT(engine_.aborted, ElementsAre(7));
  EXPECT_FALSE(transport_.status.has_value());  // the write in flight comes back first
  WriteDone(false);
  ASSERT_TRUE(transport_.status.has_value());
  EXPECT_EQ(transport_.status->error_code(), grpc::StatusCode::CANCELLED);
  Deliver(Last(engine::FinishReason::kAbort));  // the engine's last word: ignored
  EXPECT_EQ(transport_.writes.size(), 1u);
  stream_->OnCancel();  // again: nothing changes
  stream_->OnDone();
  EXPECT_THAT(stream_->history(),
              ElementsAre(S::kStarted, S::kStreaming, S::kCancelled, S::kFinished, S::kDrained));
  EXPECT_THAT(engine_.aborted, ElementsAre(7));
  EXPECT_EQ(anonymous().requests_cancelled.load(), 1);
  EXPECT_EQ(active_.load(), 0);
}

TEST_F(GenerateStreamTest, CancelWhileTheEngineIsStillAcceptingAbortsOnceAccepted) {
  Make();
  engine_.during_submit = [&] {
    stream_->OnCancel();
    EXPECT_TRUE(engine_.aborted.empty());  // no handle yet
  };
  stream_->Start(RequestBytes());
  EXPECT_THAT(engine_.aborted, ElementsAre(7));
  EXPECT_TRUE(transport_.writes.empty());
  ASSERT_TRUE(transport_.status.has_value());
  EXPECT_EQ(transport_.status->error_code(), grpc::StatusCode::CANCELLED);
  stream_->OnDone();
  EXPECT_THAT(stream_->history(),
              ElementsAre(S::kStarted, S::kCancelled, S::kFinished, S::kDrained));
}

TEST_F(GenerateStreamTest, EngineDoneBeforeSubmitReturnsWritesEverythingThenOk) {
  Make();
  engine_.during_submit = [&] {
    Deliver(Chunk(10, "a"));
    Deliver(Last(engine::FinishReason::kStop));
  };
  stream_->Start(RequestBytes());
  EXPECT_EQ(stream_->state(), S::kFinishing);
  WriteDone();
  WriteDone();
  WriteDone();
  ASSERT_EQ(transport_.writes.size(), 3u);
  EXPECT_EQ(transport_.writes[0].usage().prompt_tokens(), 3);  // the first message first
  EXPECT_EQ(transport_.writes[1].text(), "a");
  EXPECT_EQ(transport_.writes[1].request_id(), "req-7");
  EXPECT_EQ(transport_.writes[2].finish_reason(), "stop");
  ASSERT_TRUE(transport_.status.has_value());
  EXPECT_TRUE(transport_.status->ok());
  stream_->OnDone();
  EXPECT_THAT(stream_->history(),
              ElementsAre(S::kStarted, S::kFinishing, S::kFinished, S::kDrained));
  EXPECT_TRUE(engine_.aborted.empty());
}

TEST_F(GenerateStreamTest, RefusalFinishesWithItsStatusAndNoWrite) {
  Make();
  engine_.refusal = absl::ResourceExhaustedError("queue full");
  stream_->Start(RequestBytes());
  ASSERT_TRUE(transport_.status.has_value());
  EXPECT_EQ(transport_.status->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(transport_.status->error_message(), "queue full");
  EXPECT_TRUE(transport_.writes.empty());
  stream_->OnDone();
  EXPECT_THAT(stream_->history(),
              ElementsAre(S::kStarted, S::kFinishing, S::kFinished, S::kDrained));
  EXPECT_EQ(anonymous().request_failure.Get("RESOURCE_EXHAUSTED"), 1);
  EXPECT_EQ(active_.load(), 0);
}

// Issue 14, finding 4: an exception in the setup (here std::bad_alloc from Submit) used to
// escape to gRPC (an empty UNIMPLEMENTED) and leave the stream counted as active forever,
// so a drain waited its whole timeout.
TEST_F(GenerateStreamTest, ExceptionInSetupFinishesInternalNamingItAndReleasesTheDrainSlot) {
  Make();
  engine_.throw_bad_alloc = true;
  stream_->Start(RequestBytes());
  ASSERT_TRUE(transport_.status.has_value());
  EXPECT_EQ(transport_.status->error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(transport_.status->error_message(), "Generate setup failed: std::bad_alloc");
  EXPECT_EQ(anonymous().request_failure.Get("INTERNAL"), 1);
  EXPECT_EQ(active_.load(), 1);  // until gRPC says it is done
  stream_->OnDone();
  EXPECT_EQ(active_.load(), 0);
  EXPECT_THAT(stream_->history(),
              ElementsAre(S::kStarted, S::kFinishing, S::kFinished, S::kDrained));
}

// Issue 14, finding 6: a client that does not read (its write never completes) makes the
// queue grow; past the cap the request is aborted and finishes RESOURCE_EXHAUSTED.
TEST_F(GenerateStreamTest, UnreadOutputPastTheCapAbortsResourceExhausted) {
  Make(/*max_unsent_bytes=*/200);
  stream_->Start(RequestBytes());
  const int64_t first = stream_->unsent_bytes();  // the first message, in flight
  ASSERT_GT(first, 0);
  ASSERT_LT(first, 20);
  const std::string text(50, 'x');
  int delivered = 0;
  while (stream_->state() == S::kStreaming && delivered < 10) {
    Deliver(Chunk(10, text));
    ++delivered;
  }
  // Each chunk adds its 55 serialized bytes: the fourth passes 200.
  EXPECT_EQ(delivered, 4);
  EXPECT_EQ(stream_->state(), S::kFinishing);
  EXPECT_THAT(engine_.aborted, ElementsAre(7));
  EXPECT_EQ(stream_->unsent_bytes(), first);  // the queue is dropped; the write stays
  EXPECT_EQ(anonymous().requests_unsent_limit.load(), 1);
  EXPECT_EQ(anonymous().request_failure.Get("RESOURCE_EXHAUSTED"), 1);
  Deliver(Last(engine::FinishReason::kAbort));
  EXPECT_FALSE(transport_.status.has_value());
  WriteDone();
  ASSERT_TRUE(transport_.status.has_value());
  EXPECT_EQ(transport_.status->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(transport_.status->error_message(),
            "client is not reading: 231 bytes of output unsent exceed 200 "
            "(max_unsent_bytes_per_stream)");
  EXPECT_EQ(transport_.writes.size(), 1u);
  stream_->OnDone();
  EXPECT_THAT(stream_->history(),
              ElementsAre(S::kStarted, S::kStreaming, S::kFinishing, S::kFinished, S::kDrained));
}

// A reader that keeps up never meets the cap, however long the output.
TEST_F(GenerateStreamTest, AReaderThatKeepsUpNeverMeetsTheCap) {
  Make(/*max_unsent_bytes=*/200);
  stream_->Start(RequestBytes());
  for (int i = 0; i < 100; ++i) {
    Deliver(Chunk(10, std::string(50, 'x')));
    WriteDone();
  }
  Deliver(Last(engine::FinishReason::kLength));
  WriteDone();
  WriteDone();
  ASSERT_TRUE(transport_.status.has_value());
  EXPECT_TRUE(transport_.status->ok());
  EXPECT_EQ(transport_.writes.size(), 102u);
  EXPECT_EQ(anonymous().requests_unsent_limit.load(), 0);
  stream_->OnDone();
}

}  // namespace
}  // namespace pagoda::server
