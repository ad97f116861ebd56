#include "server/http/openai_logprobs.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace pagoda::server::http {
namespace {

using nlohmann::json;

double Logprob(float x) { return std::isfinite(x) ? static_cast<double>(x) : -9999.0; }

json Bytes(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

// Code points in `s`: the bytes that do not continue a UTF-8 sequence.
int64_t CodePoints(std::string_view s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; });
}

}  // namespace

TokenBytesFn TokenBytesOf(const engine::Engine& engine) {
  return [engine = &engine](int32_t id) { return engine->TokenBytes(id); };
}

ChoiceLogprobs::ChoiceLogprobs(ApiKind kind, TokenBytesFn token_bytes)
    : kind_(kind), token_bytes_(std::move(token_bytes)) {}

namespace {

// About what a token's entry takes in the response: the JSON around it and each of its
// top_logprobs (a token's text averages a few bytes; chat's "bytes" arrays double it).
int64_t EstimatedBytes(const engine::TokenLogprob& lp) {
  constexpr int64_t kEntryBytes = 64;
  return kEntryBytes * (1 + static_cast<int64_t>(lp.top.size()));
}

}  // namespace

void ChoiceLogprobs::Add(const std::vector<engine::TokenLogprob>& tokens) {
  pending_.insert(pending_.end(), tokens.begin(), tokens.end());
  for (const engine::TokenLogprob& lp : tokens) held_bytes_ += EstimatedBytes(lp);
}

void ChoiceLogprobs::Add(const SampleDelta& delta) {
  if (delta.echo && kind_ == ApiKind::kCompletion) {
    int64_t offset = 0;
    for (size_t i = 0; i < delta.prompt_token_ids.size(); ++i) {
      const int32_t id = delta.prompt_token_ids[i];
      if (i == 0 || i > delta.prompt_logprobs.size()) {  // no context before it
        prompt_.push_back({{"token", token_bytes_(id)},
                           {"logprob", nullptr},
                           {"top", nullptr},
                           {"offset", offset}});
      } else {
        prompt_.push_back(TokenJson(delta.prompt_logprobs[i - 1], offset));
      }
      offset += CodePoints(token_bytes_(id));
    }
    echo_left_ += delta.echo_bytes;
  }
  Add(delta.logprobs);
}

json ChoiceLogprobs::TokenJson(const engine::TokenLogprob& lp, int64_t offset) const {
  const std::string token = token_bytes_(lp.token_id);
  if (kind_ == ApiKind::kChat) {
    json top = json::array();
    for (const auto& [id, logprob] : lp.top) {
      const std::string t = token_bytes_(id);
      top.push_back({{"token", t}, {"logprob", Logprob(logprob)}, {"bytes", Bytes(t)}});
    }
    return {{"token", token},
            {"logprob", Logprob(lp.logprob)},
            {"bytes", Bytes(token)},
            {"top_logprobs", std::move(top)}};
  }
  // Completions: one entry of each array, gathered by Take.
  json top = json::object();
  for (const auto& [id, logprob] : lp.top) {
    const std::string t = token_bytes_(id);
    if (!top.contains(t)) top[t] = Logprob(logprob);  // a text two ids share: the likelier
  }
  if (!top.contains(token)) top[token] = Logprob(lp.logprob);
  return {{"token", token},
          {"logprob", Logprob(lp.logprob)},
          {"top", std::move(top)},
          {"offset", offset}};
}

json ChoiceLogprobs::Take(std::string_view text, bool all) {
  // The echoed prompt's text belongs to the prompt's tokens, given out with it.
  const size_t echoed = std::min(echo_left_, text.size());
  offset_ += CodePoints(text.substr(0, echoed));
  echo_left_ -= echoed;
  text.remove_prefix(echoed);
  unclaimed_.append(text);
  std::vector<json> taken = std::move(prompt_);
  prompt_.clear();
  while (!pending_.empty()) {
    const engine::TokenLogprob& lp = pending_.front();
    const size_t size = token_bytes_(lp.token_id).size();
    if (!all && size > unclaimed_.size()) break;  // its text is not all sent yet
    const int64_t offset = offset_;
    // Text the detokenizer replaced (U+FFFD) or a stop string removed may differ in size:
    // the token claims what there is.
    const size_t claimed = std::min(size, unclaimed_.size());
    offset_ += CodePoints(std::string_view(unclaimed_).substr(0, claimed));
    unclaimed_.erase(0, claimed);
    taken.push_back(TokenJson(lp, offset));
    held_bytes_ -= EstimatedBytes(lp);
    pending_.pop_front();
  }
  if (taken.empty()) return nullptr;
  if (kind_ == ApiKind::kChat) return {{"content", std::move(taken)}};
  json tokens = json::array(), logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (json& t : taken) {
    tokens.push_back(std::move(t["token"]));
    logprobs.push_back(std::move(t["logprob"]));
    top.push_back(std::move(t["top"]));
    offsets.push_back(std::move(t["offset"]));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

json TakeLogprobs(std::vector<ChoiceLogprobs>& choices, size_t i, std::string_view text, bool all) {
  if (i >= choices.size()) return nullptr;
  return choices[i].Take(text, all);
}

std::vector<json> TakeAll(std::vector<ChoiceLogprobs>& choices,
                          const std::vector<std::string>& texts) {
  std::vector<json> out;
  for (size_t i = 0; i < choices.size() && i < texts.size(); ++i) {
    out.push_back(choices[i].Take(texts[i], /*all=*/true));
  }
  return out;
}

}  // namespace pagoda::server::http
