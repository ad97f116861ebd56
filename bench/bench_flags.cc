#include "bench/bench_flags.h"

namespace pagoda::bench {
namespace {

// Where the server is and how to talk to it.
void AddServerFlags(CLI::App* app, BenchConfig* c) {
  app->add_option("--server", c->server,
                  "The server's address, host:port (required): gRPC, or HTTP with --backend "
                  "openai.");
  app->add_option("--backend", c->backend,
                  "grpc (pagoda's Generate stream) or openai (streamed POST /v1/completions on "
                  "any OpenAI-compatible server: pagoda's --http-port, llama.cpp's "
                  "llama-server, vLLM).")
      ->check(CLI::IsMember({"grpc", "openai"}));
  app->add_option("--model", c->model,
                  "openai: the requests' \"model\"; empty = the first model /v1/models lists.");
  app->add_option("--vocab-size", c->vocab_size,
                  "openai: the vocabulary size for random token ids when /v1/models does not "
                  "say it (llama.cpp and pagoda report meta.n_vocab).");
  app->add_option("--context-length", c->context_length,
                  "openai: the context length for the too-long warning when /v1/models does "
                  "not say it.");
  app->add_option("--api-key", c->api_key, "Sent as 'authorization: Bearer <key>'.");
  app->add_option("--tls-ca", c->tls_ca, "PEM file of the CA to trust; empty = plaintext.");
}

// How many requests, when, and for how long.
void AddLoadFlags(CLI::App* app, BenchConfig* c) {
  app->add_option("--concurrency", c->concurrency,
                  "Most requests in flight at once (closed loop when --request-rate is inf); "
                  "0 = unlimited.");
  app->add_option("--request-rate", c->request_rate,
                  "Open loop: requests per second, gamma-distributed gaps; inf = all at once.");
  app->add_option("--burstiness", c->burstiness,
                  "Shape of the gamma distribution of gaps: 1 = Poisson, < 1 burstier, > 1 "
                  "steadier.");
  app->add_option("--num-prompts", c->num_prompts, "Requests to measure.");
  app->add_option("--seed", c->seed, "Seed of the dataset and the arrival schedule.");
  app->add_option("--warmup", c->warmup, "Requests sent first and not counted.");
  app->add_option("--duration", c->duration_s,
                  "Send no new request after this many seconds (in-flight ones finish); 0 = no "
                  "limit.");
  app->add_option("--request-timeout", c->request_timeout_s,
                  "Per-request deadline in seconds (DEADLINE_EXCEEDED counts as failed); 0 = "
                  "none.");
  app->add_option("--tenant", c->tenants,
                  "Repeatable: one tenant of a multi-tenant run, "
                  "name=NAME[,key=KEY][,weight=W][,concurrency=N|,rate=R][,num-prompts=N]; "
                  "unset fields take --api-key, --concurrency, --request-rate, --num-prompts. "
                  "Each tenant sends its own requests with its key; the report adds per-tenant "
                  "rows and Jain's fairness index (docs/BENCH.md).")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
}

// What the requests are.
void AddDatasetFlags(CLI::App* app, BenchConfig* c) {
  app->add_option("--dataset", c->dataset, "random, file or shared-prefix.")
      ->check(CLI::IsMember({"random", "file", "shared-prefix"}));
  app->add_option("--dataset-path", c->dataset_path,
                  "--dataset=file: JSONL of {\"prompt\": str, \"max_tokens\": int} lines.");
  app->add_option("--input-len", c->input_len, "random: prompt tokens after the shared prefix.");
  app->add_option("--output-len", c->output_len,
                  "max_tokens of each request (random, shared-prefix; file lines without one).");
  app->add_option("--range-ratio", c->range_ratio,
                  "random: lengths uniform in [len * (1 - r), len * (1 + r)], r in [0, 1).");
  app->add_option("--prefix-len", c->prefix_len,
                  "random: random tokens every prompt starts with; shared-prefix: per-group "
                  "prefix.");
  app->add_option("--num-groups", c->num_groups, "shared-prefix: number of distinct prefixes.");
  app->add_option("--suffix-len", c->suffix_len,
                  "shared-prefix: each request's own tokens after its prefix.");
  app->add_flag("--ignore-eos", c->ignore_eos,
                "Keep generating after EOS so output lengths are fixed.");
  app->add_flag("--parse-special", c->parse_special,
                "Prompt text that spells a special token becomes that token (the request's "
                "parse_special; default true); --parse-special=false = plain text.");
  app->add_option("--temperature", c->temperature, "Sampling temperature; 0 = greedy.");
}

// What is reported and where.
void AddReportFlags(CLI::App* app, BenchConfig* c) {
  app->add_option("--goodput", c->goodput,
                  "SLOs in ms, e.g. --goodput ttft:500 tpot:50 e2el:2000 (or comma-separated); "
                  "reports the requests meeting all of them.")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_option("--json-out", c->json_out, "Write the result as JSON (vLLM's key names) here.");
  app->add_flag("--progress", c->progress,
                "Show a progress line on stderr (default true; --progress=false turns it off).");
}

}  // namespace

void AddBenchFlags(CLI::App* app, BenchConfig* config) {
  AddServerFlags(app, config);
  AddLoadFlags(app, config);
  AddDatasetFlags(app, config);
  AddReportFlags(app, config);
}

}  // namespace pagoda::bench
