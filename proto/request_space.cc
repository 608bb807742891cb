#include "proto/request_space.h"

#include <string>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "search/space_dimensions.h"
#include "spec/field_table.h"

namespace autoaccel {
namespace {

using google::protobuf::FieldDescriptor;

const FieldDescriptor* RequestField(absl::string_view name) {
  return v1::TuneRequest::descriptor()->FindFieldByName(std::string(name));
}

}  // namespace

absl::Status SpaceListsFromRequest(const v1::TuneRequest& request, SpaceRequest* space) {
  const auto* reflection = request.GetReflection();
  absl::Status status;
  AnyRow(kSpaceDimensions, [&](const auto& row) {
    using T = RowValue<decltype(row)>;
    const FieldDescriptor* field = RequestField(row.request_field);
    std::vector<T>& values = space->*row.member;
    values.clear();
    const int n = reflection->FieldSize(request, field);
    for (int i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, int>) {
        values.push_back(reflection->GetRepeatedInt32(request, field, i));
      } else {
        const std::string& name = reflection->GetRepeatedString(request, field, i);
        absl::StatusOr<T> value = ParseChoice<T>(row.names, row.key, name);
        if (!value.ok()) {
          absl::string_view why = value.status().message();  // "strategy.<key>: <why>"
          if (size_t colon = why.find(": "); colon != absl::string_view::npos) {
            why.remove_prefix(colon + 2);
          }
          status = absl::InvalidArgumentError(absl::StrCat(row.request_field, ": ", why));
          return true;
        }
        values.push_back(*value);
      }
    }
    return false;
  });
  return status;
}

int CandidatesGiven(const v1::TuneRequest& request, absl::string_view request_field) {
  const FieldDescriptor* field = RequestField(request_field);
  return field == nullptr ? 0 : request.GetReflection()->FieldSize(request, field);
}

absl::Status AddCandidate(absl::string_view request_field, absl::string_view value,
                          v1::TuneRequest* request) {
  absl::Status status = absl::NotFoundError(
      absl::StrCat("no search dimension lists its candidates in '", request_field, "'"));
  AnyRow(kSpaceDimensions, [&](const auto& row) {
    if (row.request_field != request_field) return false;
    const FieldDescriptor* field = RequestField(request_field);
    const auto* reflection = request->GetReflection();
    if constexpr (std::is_same_v<RowValue<decltype(row)>, int>) {
      int number = 0;
      if (!absl::SimpleAtoi(value, &number)) {
        status = absl::InvalidArgumentError(
            absl::StrCat(row.flag, ": '", value, "' is not a whole number"));
        return true;
      }
      reflection->AddInt32(request, field, number);
    } else {
      reflection->AddString(request, field, std::string(value));
    }
    status = absl::OkStatus();
    return true;
  });
  return status;
}

}  // namespace autoaccel
