// A small synchronous client for pagoda's Generation service: channel setup (plain or TLS,
// optional API key) and a streaming Generate that hands each response to a callback.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda::client {

struct ChannelOptions {
  std::string address;   // host:port
  std::string api_key;   // sent as "authorization: Bearer <key>" when not empty
  std::string tls_ca;    // PEM file of the CA to trust; empty = plaintext
  std::string tls_cert;  // with tls_ca: PEM client certificate chain for mutual TLS ...
  std::string tls_key;   // ... and its private key
};

// A channel to `options.address`; InvalidArgument when a PEM file cannot be read or
// tls_cert/tls_key come without the other or without tls_ca.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options);

class GenerationClient {
 public:
  GenerationClient(std::shared_ptr<grpc::Channel> channel, std::string api_key);

  // Runs Generate, calling `on_response` for each streamed message in order; returns the
  // stream's final status. `context_setup` may set a deadline or other options first.
  grpc::Status Generate(const v1::GenerateRequest& request,
                        const std::function<void(const v1::GenerateResponse&)>& on_response,
                        const std::function<void(grpc::ClientContext*)>& context_setup = nullptr);
  grpc::Status Tokenize(const v1::TokenizeRequest& request, v1::TokenizeResponse* response);
  grpc::Status Detokenize(const v1::DetokenizeRequest& request, v1::DetokenizeResponse* response);
  grpc::Status GetModelInfo(v1::ModelInfo* info);

 private:
  void Prepare(grpc::ClientContext* context) const;

  std::unique_ptr<v1::Generation::Stub> stub_;
  std::string api_key_;
};

}  // namespace pagoda::client
