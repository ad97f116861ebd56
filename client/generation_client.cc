#include "client/generation_client.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace pagoda::client {

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", flag, " ", path));
  std::stringstream pem;
  pem << in.rdbuf();
  return pem.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  const bool client_cert = !options.tls_cert.empty() || !options.tls_key.empty();
  if (client_cert &&
      (options.tls_cert.empty() || options.tls_key.empty() || options.tls_ca.empty())) {
    return absl::InvalidArgumentError(
        "a client certificate needs --tls-cert, --tls-key and --tls-ca");
  }
  if (options.tls_ca.empty()) {
    return grpc::CreateCustomChannel(options.address, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPem(options.tls_ca, "--tls-ca");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *ca;
  if (client_cert) {
    absl::StatusOr<std::string> cert = ReadPem(options.tls_cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(options.tls_key, "--tls-key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
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
