#include "client/generation_client.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace pagoda::client {

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  if (options.tls_ca.empty()) {
    return grpc::CreateCustomChannel(options.address, grpc::InsecureChannelCredentials(), args);
  }
  std::ifstream in(options.tls_ca);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read --tls-ca ", options.tls_ca));
  std::stringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  return grpc::CreateCustomChannel(options.address, grpc::SslCredentials(ssl), args);
}

GenerationClient::GenerationClient(std::shared_ptr<grpc::Channel> channel, std::string api_key)
    : stub_(v1::Generation::NewStub(channel)), api_key_(std::move(api_key)) {}

void GenerationClient::Prepare(grpc::ClientContext* context) const {
  if (!api_key_.empty()) context->AddMetadata("authorization", "Bearer " + api_key_);
}

grpc::Status GenerationClient::Generate(
    const v1::GenerateRequest& request,
    const std::function<void(const v1::GenerateResponse&)>& on_response,
    const std::function<void(grpc::ClientContext*)>& context_setup) {
  grpc::ClientContext context;
  Prepare(&context);
  if (context_setup) context_setup(&context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) on_response(response);
  return reader->Finish();
}

grpc::Status GenerationClient::Tokenize(const v1::TokenizeRequest& request,
                                        v1::TokenizeResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return stub_->Tokenize(&context, request, response);
}

grpc::Status GenerationClient::Detokenize(const v1::DetokenizeRequest& request,
                                          v1::DetokenizeResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return stub_->Detokenize(&context, request, response);
}

grpc::Status GenerationClient::GetModelInfo(v1::ModelInfo* info) {
  grpc::ClientContext context;
  Prepare(&context);
  return stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), info);
}

}  // namespace pagoda::client
