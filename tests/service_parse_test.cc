// Requests the coordinator cannot parse, through its real gRPC services on
// 127.0.0.1:0: every method of TuningService and WorkerRegistry answers a
// string field that is not UTF-8 with INVALID_ARGUMENT naming the field, and
// bytes that are no message at all with INVALID_ARGUMENT naming the type
// (gRPC's own answer to both was UNIMPLEMENTED with no message).
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <memory>
#include <optional>
#include <string>

#include "common/raw_call.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth.h"
#include "server/job_manager.h"
#include "server/service.h"
#include "tests/in_process_coordinator.h"

namespace autoaccel {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using ::testing::HasSubstr;

constexpr char kNotUtf8[] = "abc\xc3\x28";  // a 2-byte lead followed by no continuation byte
// Field 1, length-delimited, 127 bytes long, with 2 bytes present: no message.
const std::string kNoMessage(
    "\x0a\x7f"
    "ab",
    4);

// Serialized without the UTF-8 check a parse makes (serializing only logs).
std::string Wire(const Message& m) {
  std::string out;
  EXPECT_TRUE(m.SerializePartialToString(&out));
  return out;
}

TEST(FirstNonUtf8FieldTest, NamesTheFieldAsAPathFromTheRequest) {
  v1::SubmitJobRequest submit;
  submit.mutable_request()->mutable_model()->set_family("gpt2");
  submit.mutable_request()->mutable_model()->set_config_json(kNotUtf8);
  EXPECT_EQ(FirstNonUtf8Field(*submit.GetDescriptor(), Wire(submit)), "request.model.config_json");

  v1::RegisterRequest reg;
  reg.set_worker_id("w1");
  reg.add_devices()->set_name("cpu:0");
  reg.add_devices()->set_name(kNotUtf8);
  EXPECT_EQ(FirstNonUtf8Field(*reg.GetDescriptor(), Wire(reg)), "devices[1].name");

  reg.mutable_devices(1)->set_name("cpu:1");
  EXPECT_EQ(FirstNonUtf8Field(*reg.GetDescriptor(), Wire(reg)), std::nullopt);
  EXPECT_EQ(FirstNonUtf8Field(*reg.GetDescriptor(), "\x0a\xff"), std::nullopt) << "malformed";
}

// Sets the first string field of `m` met depth-first (entering singular
// messages) to `value`; its path, or nullopt when `m` has none.
std::optional<std::string> SetFirstString(Message* m, const std::string& value) {
  const Descriptor& d = *m->GetDescriptor();
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor* f = d.field(i);
    if (f->is_repeated()) continue;
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      m->GetReflection()->SetString(m, f, value);
      return f->name();
    }
    if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (auto inner = SetFirstString(m->GetReflection()->MutableMessage(m, f), value)) {
        return f->name() + "." + *inner;
      }
    }
  }
  return std::nullopt;
}

class ServiceParseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(coordinator_.Start("autoaccel-parse-", &executor_, &auth_));
    channel_ = coordinator_.Channel();
  }

  // Calls unary `method` with `wire` as its request.
  grpc::Status CallRaw(const google::protobuf::MethodDescriptor& method, const std::string& wire) {
    grpc::GenericStub stub(channel_);
    grpc::Slice slice(wire);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext ctx;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, absl::StrCat("/", method.service()->full_name(), "/", method.name()),
                   grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }

  // WatchJob of a job id that is not UTF-8: how the stream ends (it carries
  // no event).
  grpc::Status WatchWithJobIdNotUtf8() {
    v1::WatchJobRequest watch;
    watch.set_job_id(kNotUtf8);
    grpc::ClientContext ctx;
    auto reader = v1::TuningService::NewStub(channel_)->WatchJob(&ctx, watch);
    v1::JobEvent event;
    EXPECT_FALSE(reader->Read(&event));
    return reader->Finish();
  }

  // Every unary method of every service this coordinator serves.
  std::vector<const google::protobuf::MethodDescriptor*> UnaryMethods() {
    std::vector<const google::protobuf::MethodDescriptor*> out;
    for (const char* name :
         {v1::TuningService::service_full_name(), v1::WorkerRegistry::service_full_name()}) {
      const auto* service =
          google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
      for (int i = 0; i < service->method_count(); ++i) {
        if (!service->method(i)->server_streaming()) out.push_back(service->method(i));
      }
    }
    return out;
  }

  testing::NoWorkers executor_;
  Authenticator auth_;  // no tokens
  testing::InProcessCoordinator coordinator_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ServiceParseTest, EveryMethodNamesTheFieldThatIsNotUtf8) {
  int with_strings = 0;
  for (const auto* method : UnaryMethods()) {
    std::unique_ptr<Message> request(google::protobuf::MessageFactory::generated_factory()
                                         ->GetPrototype(method->input_type())
                                         ->New());
    std::optional<std::string> field = SetFirstString(request.get(), kNotUtf8);
    if (!field) continue;  // nothing to spoil
    ++with_strings;
    grpc::Status s = CallRaw(*method, Wire(*request));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method->full_name();
    EXPECT_THAT(s.error_message(), HasSubstr(*field + ": not valid UTF-8")) << method->full_name();
  }
  EXPECT_GE(with_strings, 8) << "most requests carry a string";

  // The streaming method, through the generated stub.
  grpc::Status s = WatchWithJobIdNotUtf8();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("job_id: not valid UTF-8"));
}

TEST_F(ServiceParseTest, EveryMethodRefusesBytesThatAreNoMessage) {
  for (const auto* method : UnaryMethods()) {
    grpc::Status s = CallRaw(*method, kNoMessage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method->full_name();
    EXPECT_THAT(s.error_message(),
                HasSubstr("not a well-formed " + method->input_type()->full_name()));
  }
}

// With tokens required: a caller without credentials is answered before its
// request is parsed (a parse copies up to the 528 MiB message limit), so
// bytes that are no message get UNAUTHENTICATED, not INVALID_ARGUMENT.
class ServiceParseWithTokensTest : public ServiceParseTest {
 protected:
  void SetUp() override {
    auth_ = Authenticator({{"alice-token-0123456789abcdef0123", "alice", false}},
                          "join-token-0123456789abcdef0123456");
    ServiceParseTest::SetUp();
  }
};

TEST_F(ServiceParseWithTokensTest, AnUnauthenticatedRequestIsRefusedUnparsed) {
  for (const auto* method : UnaryMethods()) {
    grpc::Status s = CallRaw(*method, kNoMessage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method->full_name();
  }
  EXPECT_EQ(WatchWithJobIdNotUtf8().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(ServiceParseTest, WellFormedRequestsAreServedAsBefore) {
  auto stub = v1::TuningService::NewStub(channel_);
  grpc::ClientContext ctx;
  v1::GetJobRequest get;
  get.set_job_id("job-that-does-not-exist");
  v1::Job job;
  EXPECT_EQ(stub->GetJob(&ctx, get, &job).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext list_ctx;
  v1::ListWorkersResponse workers;
  EXPECT_TRUE(stub->ListWorkers(&list_ctx, v1::ListWorkersRequest(), &workers).ok());
  EXPECT_TRUE(workers.workers().empty());

  // A watch writes event after event on one stream until the job ends.
  v1::SubmitJobRequest submit;
  submit.mutable_request()->mutable_model()->set_family("gpt2");
  submit.mutable_request()->mutable_model()->set_config_json(
      R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64, "n_positions": 32})");
  submit.mutable_request()->set_seq_len(16);
  submit.mutable_request()->set_global_batch_size(4);
  submit.mutable_request()->set_time_limit_seconds(60);
  grpc::ClientContext submit_ctx;
  v1::Job submitted;
  ASSERT_TRUE(stub->SubmitJob(&submit_ctx, submit, &submitted).ok());
  grpc::ClientContext watch_ctx;
  v1::WatchJobRequest watch;
  watch.set_job_id(submitted.job_id());
  auto reader = stub->WatchJob(&watch_ctx, watch);
  v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.job().job_id(), submitted.job_id());
  grpc::ClientContext cancel_ctx;
  v1::CancelJobRequest cancel;
  cancel.set_job_id(submitted.job_id());
  v1::Job cancelled;
  ASSERT_TRUE(stub->CancelJob(&cancel_ctx, cancel, &cancelled).ok());
  int events = 1;
  while (reader->Read(&event)) ++events;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_GE(events, 2);
  EXPECT_EQ(event.job().state(), "CANCELLED");
}

}  // namespace
}  // namespace autoaccel
