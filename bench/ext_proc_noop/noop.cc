// A CEILING PROBE, NOT HEADROOM: an Envoy ext_proc server that does nothing. It answers every
// ProcessingRequest with the matching empty CONTINUE ProcessingResponse and has no admission logic
// at all. bench/gateway_envoy.py --ceiling runs it to measure what any ext_proc, even a compiled one
// that costs nothing, leaves of Envoy's requests/s on this machine (Envoy's own ext_proc work).
//
// Messages stay raw bytes (a generic service): no protobuf classes, so the answer costs a few bytes
// of hand-encoding. Field numbers from envoy/service/ext_proc/v3/external_processor.proto (pinned:
// the envoy package in .venv): ProcessingRequest's oneof `request` is request_headers 2,
// response_headers 3, request_body 4, response_body 5, request_trailers 6, response_trailers 7;
// ProcessingResponse's oneof `response` numbers the same kinds 1..6, i.e. one less. An empty
// HeadersResponse / BodyResponse / TrailersResponse is CONTINUE with no mutation.
//
//   make -C bench/ext_proc_noop OUT=/tmp/noop && /tmp/noop/noop 127.0.0.1:50051

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace {

const char kMethod[] = "/envoy.service.ext_proc.v3.ExternalProcessor/Process";

bool Varint(const uint8_t*& p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; p < end && shift < 64; shift += 7) {
    uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

// The field number (2..7) of the request's oneof, or 0. Envoy serializes in field order, so it is
// the first field; the loop skips any other field anyway, should one come before it.
int Kind(const uint8_t* p, const uint8_t* end) {
  while (p < end) {
    uint64_t tag, len;
    if (!Varint(p, end, &tag)) return 0;
    int field = int(tag >> 3), wire = int(tag & 7);
    if (wire == 2 && field >= 2 && field <= 7) return field;
    switch (wire) {
      case 0:
        if (!Varint(p, end, &len)) return 0;
        break;
      case 1: p += 8; break;
      case 5: p += 4; break;
      case 2:
        if (!Varint(p, end, &len) || len > uint64_t(end - p)) return 0;
        p += len;
        break;
      default: return 0;
    }
  }
  return 0;
}

// Reads go on while an answer is being written (Envoy may send the next response-body chunk before
// the last answer): answers queue and are written in order, one write in flight at a time.
class Stream : public grpc::ServerGenericBidiReactor {
 public:
  explicit Stream(grpc::GenericCallbackServerContext* ctx) {
    if (ctx->method() != kMethod) {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "only " + std::string(kMethod)));
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // Envoy half-closed: finish once the queued answers are out
      std::lock_guard<std::mutex> l(mu_);
      reading_ = false;
      MaybeFinish();
      return;
    }
    grpc::Slice s;
    int kind = in_.DumpToSingleSlice(&s).ok() ? Kind(s.begin(), s.end()) : 0;
    if (kind == 0) {
      std::lock_guard<std::mutex> l(mu_);
      reading_ = false;
      status_ = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request kind");
      MaybeFinish();
      return;
    }
    const uint8_t answer[2] = {uint8_t(((kind - 1) << 3) | 2), 0};  // field kind-1, length 0
    grpc::Slice out(answer, sizeof answer);
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.emplace_back(&out, 1);
      if (!writing_) {
        writing_ = true;
        StartWrite(&queue_.front());
      }
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    queue_.pop_front();
    writing_ = false;
    if (!ok) {
      queue_.clear();
      reading_ = false;  // the stream is broken; a read pending returns !ok and finds nothing to do
    } else if (!queue_.empty()) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
    MaybeFinish();
  }

  void OnDone() override { delete this; }

 private:
  void MaybeFinish() {  // under mu_
    if (!reading_ && !writing_ && !finished_) {
      finished_ = true;
      Finish(status_);
    }
  }

  grpc::ByteBuffer in_;
  std::mutex mu_;
  std::deque<grpc::ByteBuffer> queue_;  // deque: the front's address stays put while others are added
  bool reading_ = true, writing_ = false, finished_ = false;
  grpc::Status status_;
};

class Service : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Stream(ctx);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
    return 2;
  }
  Service service;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(argv[1], grpc::InsecureServerCredentials(), &port);
  // The same server options as integrations/envoy/ext_proc.py's SERVER_OPTIONS: the comparison is of
  // the language and the logic, not of the HTTP/2 settings.
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
  std::fprintf(stderr, "no-op ext_proc (ceiling probe) listening on %s\n", argv[1]);
  server->Wait();
  return 0;
}
