#include "server/http/http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "absl/strings/str_cat.h"
#include "server/http/http_session.h"
#include "spdlog/spdlog.h"

namespace pagoda::server::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpServer::Io {
  net::io_context context;
  tcp::acceptor acceptor{context};
  net::thread_pool workers;  // the preparation threads (HttpContext::Offload)
  Io(int threads, int workers) : context(threads), workers(workers) {}
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpDeps deps) {
  std::unique_ptr<HttpServer> server(new HttpServer());
  const int threads = std::max(1, options.num_threads);
  const bool prepares = options.session.routes == RouteSet::kOpenAi;
  server->io_ =
      std::make_unique<Io>(threads, prepares ? std::max(1, options.num_prepare_threads) : 1);
  server->context_ = std::make_shared<HttpContext>(std::move(deps), options.session);
  server->context_->set_workers(&server->io_->workers);
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(options.host, ec);
  auto fail = [&](const char* what) {
    return absl::UnavailableError(absl::StrCat("HTTP: cannot ", what, " ", options.host, ":",
                                               options.port, ": ", ec.message()));
  };
  if (ec) return fail("parse address");
  tcp::acceptor& acceptor = server->io_->acceptor;
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(options.port));
  if (acceptor.open(endpoint.protocol(), ec); ec) return fail("open");
  // SO_REUSEADDR only (never SO_REUSEPORT: a second daemon must fail to bind, not share).
  if (acceptor.set_option(net::socket_base::reuse_address(true), ec); ec) return fail("set up");
  if (acceptor.bind(endpoint, ec); ec) return fail("bind");
  if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) return fail("listen on");
  server->port_ = acceptor.local_endpoint().port();
  server->Accept();
  for (int i = 0; i < threads; ++i) {
    server->threads_.emplace_back([io = server->io_.get()] { io->context.run(); });
  }
  return server;
}

void HttpServer::Accept() {
  io_->acceptor.async_accept(net::make_strand(io_->context), [this](boost::system::error_code ec,
                                                                    tcp::socket socket) {
    if (ec == net::error::operation_aborted || !io_->acceptor.is_open()) return;
    if (!ec) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<HttpSession>(std::move(socket), context_)->Run();
      Accept();
      return;
    }
    // Out of descriptors, say: retry a little later rather than spin.
    spdlog::warn("HTTP accept: {}", ec.message());
    auto timer = std::make_shared<net::steady_timer>(io_->context, std::chrono::milliseconds(100));
    timer->async_wait([this, timer](boost::system::error_code) { Accept(); });
  });
}

void HttpServer::StartDraining() { context_->set_draining(); }

int64_t HttpServer::Drain(absl::Time deadline) {
  StartDraining();
  if (context_->WaitIdle(deadline)) return 0;
  return context_->CutAll();
}

HttpServer::~HttpServer() {
  if (io_ == nullptr) return;
  context_->set_draining();
  context_->CutAll();  // no engine thread posts to a connection after this
  net::post(io_->context, [io = io_.get()] {
    boost::system::error_code ignored;
    io->acceptor.close(ignored);
  });
  io_->context.stop();
  for (std::thread& t : threads_) t.join();
  // A preparation still running finds the registry cut and aborts what it submitted; what
  // it posts to the stopped loop is destroyed with it.
  io_->workers.stop();
  io_->workers.join();
  context_->set_workers(nullptr);
  io_.reset();  // destroys the connections still waiting in the loop
}

}  // namespace pagoda::server::http
