// Headroom's compiled ext_proc front (issue 49.3): a generic gRPC server for Envoy's ext_proc filter
// that decides nothing itself. Each Process stream's messages go, as raw bytes, to a Python decision
// worker (integrations/envoy/front_worker.py) over a unix socket; the worker runs the Python ext_proc's
// own code (ext_proc.Processor) and sends back serialized ProcessingResponses, then the end of the
// stream. Every rule stays in Python: this file only moves bytes. What it saves is grpcio's
// per-stream Python (HTTP/2, the call objects), the cost that bench/ext_proc_noop measured.
//
//   make -C integrations/envoy/front OUT=/tmp/headroom-front
//   /tmp/headroom-front/front 127.0.0.1:50051 /run/headroom/worker.sock [more worker sockets…]
//
// Frames, both ways: u32 length of the rest (little-endian), u64 stream id, u8 type, data.
//   front → worker: OPEN (data: the stream's x-headroom-layout metadata), MSG (a ProcessingRequest),
//                   HALF_CLOSE (Envoy sent its last message), CANCEL (Envoy cancelled the stream)
//   worker → front: WRITE (a ProcessingResponse to send), END (u8 gRPC status code + message),
//                   ERROR (a frame the worker refused: logged here)
// A worker that cannot be reached, or goes away mid-stream: the stream fails with UNAVAILABLE, so the
// filter's failure_mode_allow decides (false in Headroom's yaml: Envoy answers 500), and the front
// connects again every 50 ms in the background. Several worker sockets: streams go round-robin to the
// connected ones (one worker process per core).

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

const char kMethod[] = "/envoy.service.ext_proc.v3.ExternalProcessor/Process";
const char kLayout[] = "x-headroom-layout";
enum : uint8_t { OPEN = 1, MSG = 2, HALF_CLOSE = 3, CANCEL = 4, WRITE = 5, END = 6, ERROR = 7 };
const uint32_t kHead = 9;             // id + type
const uint32_t kMaxFrame = 64 << 20;  // from the worker; Envoy's messages are bounded by gRPC's 4 MiB

void Append(std::string* out, uint64_t id, uint8_t type, const void* data, size_t n) {
  uint32_t len = uint32_t(kHead + n);
  char head[13];
  std::memcpy(head, &len, 4);  // little-endian hosts (x86-64, arm64)
  std::memcpy(head + 4, &id, 8);
  head[12] = char(type);
  out->append(head, sizeof head);
  out->append(static_cast<const char*>(data), n);
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

class Stream;

// One decision worker: its socket, the streams it serves, a thread that connects and reads.
class Worker {
 public:
  explicit Worker(std::string path) : path_(std::move(path)) {}
  bool up() const { return up_.load(std::memory_order_acquire); }
  void Start() { std::thread([this] { Run(); }).detach(); }

  bool Send(const std::string& frames) {
    std::lock_guard<std::mutex> l(wmu_);
    const char* p = frames.data();
    size_t n = frames.size();
    while (n && fd_ >= 0) {
      ssize_t w = send(fd_, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        shutdown(fd_, SHUT_RDWR);  // the reader thread sees it, fails the streams, reconnects
        return false;
      }
      p += w;
      n -= size_t(w);
    }
    return n == 0;
  }
  void Add(uint64_t id, Stream* s) {
    std::lock_guard<std::mutex> l(smu_);
    streams_[id] = s;
  }
  void Remove(uint64_t id) {
    std::lock_guard<std::mutex> l(smu_);
    streams_.erase(id);
  }

 private:
  void Run();
  void Serve(int fd);
  std::string path_;
  std::atomic<bool> up_{false};
  std::mutex wmu_;  // writes, fd_
  int fd_ = -1;
  std::mutex smu_;  // streams_; a Stream is deleted only after leaving it (OnDone), so it lives while held
  std::unordered_map<uint64_t, Stream*> streams_;
};

class Front;

class Stream : public grpc::ServerGenericBidiReactor {
 public:
  Stream(grpc::GenericCallbackServerContext* ctx, Worker* w, uint64_t id) : id_(id) {
    if (ctx->method() != kMethod) {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "only " + std::string(kMethod)));
      return;
    }
    if (w == nullptr) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "Headroom front: no decision worker connected"));
      return;
    }
    auto it = ctx->client_metadata().find(kLayout);
    if (it != ctx->client_metadata().end()) layout_.assign(it->second.data(), it->second.size());
    worker_ = w;
    worker_->Add(id_, this);
    std::lock_guard<std::mutex> l(mu_);
    if (finished_ || finishing_) return;  // the worker went away meanwhile: Fail finished it
    reading_ = true;
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    std::string frames;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (finished_ || finishing_) {
        reading_ = false;
        return;
      }
      if (!ok) {
        reading_ = false;
        if (!opened_) {  // Envoy closed before any message: nothing to decide
          FinishNow(grpc::Status::OK);
          return;
        }
        Append(&frames, id_, HALF_CLOSE, "", 0);
      } else {
        grpc::Slice s;
        if (!in_.DumpToSingleSlice(&s).ok()) {
          FinishNow(grpc::Status(grpc::StatusCode::INTERNAL, "Headroom front: unreadable message"));
          return;
        }
        if (!opened_) {  // OPEN goes with the first message: one write, one wake-up of the worker
          opened_ = true;
          Append(&frames, id_, OPEN, layout_.data(), layout_.size());
        }
        Append(&frames, id_, MSG, s.begin(), s.size());
      }
    }
    if (!worker_->Send(frames)) {
      Fail("Headroom front: the decision worker is unreachable");
      return;
    }
    if (ok) {
      std::lock_guard<std::mutex> l(mu_);
      if (!finished_ && !finishing_) StartRead(&in_);
      else reading_ = false;
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    queue_.pop_front();
    writing_ = false;
    if (!ok) queue_.clear();
    else if (!queue_.empty()) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
    MaybeFinish();
  }

  void OnCancel() override {
    bool tell;
    {
      std::lock_guard<std::mutex> l(mu_);
      tell = opened_ && !finishing_ && !finished_;
    }
    if (tell) {
      std::string f;
      Append(&f, id_, CANCEL, "", 0);
      worker_->Send(f);
    }
  }

  void OnDone() override {
    if (worker_ != nullptr) worker_->Remove(id_);
    delete this;
  }

  // From the worker's reader thread (under its streams lock, so this object is alive).
  void Answer(const char* p, size_t n) {
    std::lock_guard<std::mutex> l(mu_);
    if (finished_ || finishing_) return;
    grpc::Slice s(p, n);
    queue_.emplace_back(&s, 1);
    if (!writing_) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
  }
  void End(grpc::Status st) {
    std::lock_guard<std::mutex> l(mu_);
    if (finished_ || finishing_) return;
    finishing_ = true;
    status_ = std::move(st);
    MaybeFinish();
  }
  void Fail(const std::string& why) {
    std::lock_guard<std::mutex> l(mu_);
    if (finished_) return;
    queue_.clear();  // an answer in flight stays valid: OnWriteDone pops it
    finishing_ = true;
    status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, why);
    MaybeFinish();
  }

 private:
  void MaybeFinish() {  // under mu_: once the last answer is out (a read may be pending: it ends !ok)
    if (finishing_ && !writing_ && !finished_) FinishNow(status_);
  }
  void FinishNow(grpc::Status st) {  // under mu_
    finished_ = true;
    Finish(std::move(st));
  }

  uint64_t id_;
  Worker* worker_ = nullptr;
  std::string layout_;
  grpc::ByteBuffer in_;
  std::mutex mu_;
  std::deque<grpc::ByteBuffer> queue_;  // deque: the front's address stays put while others are added
  bool reading_ = false, writing_ = false, opened_ = false, finishing_ = false, finished_ = false;
  grpc::Status status_;
};

void Worker::Run() {
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      if (fd >= 0) close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    {
      std::lock_guard<std::mutex> l(wmu_);
      fd_ = fd;
    }
    up_.store(true, std::memory_order_release);
    std::fprintf(stderr, "Headroom front: connected to worker %s\n", path_.c_str());
    Serve(fd);
    up_.store(false, std::memory_order_release);
    {
      std::lock_guard<std::mutex> l(wmu_);
      fd_ = -1;
      close(fd);
    }
    std::fprintf(stderr, "Headroom front: worker %s went away; reconnecting\n", path_.c_str());
    std::lock_guard<std::mutex> l(smu_);
    for (auto& kv : streams_) kv.second->Fail("Headroom front: the decision worker went away");
    streams_.clear();
  }
}

void Worker::Serve(int fd) {
  std::string buf;
  for (;;) {
    char head[13];
    if (!ReadAll(fd, head, sizeof head)) return;
    uint32_t len;
    uint64_t id;
    std::memcpy(&len, head, 4);
    std::memcpy(&id, head + 4, 8);
    uint8_t type = uint8_t(head[12]);
    if (len < kHead || len > kMaxFrame) {
      std::fprintf(stderr, "Headroom front: worker %s sent a frame of length %u: dropping the connection\n",
                   path_.c_str(), len);
      return;
    }
    buf.resize(len - kHead);
    if (!ReadAll(fd, buf.data(), buf.size())) return;
    if (type == ERROR) {
      std::fprintf(stderr, "Headroom front: worker %s refused a frame of stream %llu: %s\n", path_.c_str(),
                   static_cast<unsigned long long>(id), buf.c_str());
      continue;
    }
    if (type != WRITE && type != END) {
      std::fprintf(stderr, "Headroom front: worker %s sent frame type %u: dropping the connection\n",
                   path_.c_str(), unsigned(type));
      return;
    }
    std::lock_guard<std::mutex> l(smu_);
    auto it = streams_.find(id);
    if (it == streams_.end()) continue;  // ended or cancelled meanwhile
    if (type == WRITE) {
      it->second->Answer(buf.data(), buf.size());
    } else {
      int code = buf.empty() ? int(grpc::StatusCode::INTERNAL) : uint8_t(buf[0]);
      std::string msg = buf.size() > 1 ? buf.substr(1) : std::string();
      it->second->End(code == 0 ? grpc::Status::OK : grpc::Status(grpc::StatusCode(code), msg));
      streams_.erase(it);  // nothing more for it from the worker
    }
  }
}

class Service : public grpc::CallbackGenericService {
 public:
  explicit Service(std::vector<std::unique_ptr<Worker>>* workers) : workers_(workers) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    return new Stream(ctx, Pick(id), id);
  }

 private:
  Worker* Pick(uint64_t id) {  // round-robin over the connected workers
    size_t n = workers_->size();
    for (size_t i = 0; i < n; ++i) {
      Worker* w = (*workers_)[(id + i) % n].get();
      if (w->up()) return w;
    }
    return nullptr;
  }
  std::vector<std::unique_ptr<Worker>>* workers_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s HOST:PORT WORKER_SOCKET [WORKER_SOCKET…]\n", argv[0]);
    return 2;
  }
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 2; i < argc; ++i) {
    if (std::strlen(argv[i]) >= sizeof(sockaddr_un{}.sun_path)) {
      std::fprintf(stderr, "worker socket path too long: %s\n", argv[i]);
      return 2;
    }
    workers.push_back(std::make_unique<Worker>(argv[i]));
  }
  for (auto& w : workers) w->Start();
  Service service(&workers);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(argv[1], grpc::InsecureServerCredentials(), &port);
  // integrations/envoy/server.py's SERVER_OPTIONS: the same HTTP/2 settings as the Python ext_proc.
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1000);
  b.AddChannelArgument(GRPC_ARG_OPTIMIZATION_TARGET, std::string("latency"));
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  b.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "cannot listen on %s\n", argv[1]);
    return 1;
  }
  std::fprintf(stderr, "Headroom ext_proc front listening on %s, %d worker socket(s)\n", argv[1], argc - 2);
  server->Wait();
  return 0;
}
