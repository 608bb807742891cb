// The gMock matchers the tests use, by their short names, for test code in
// namespace autoaccel (one list instead of one per test file).
#ifndef AUTOACCEL_TESTS_TEST_MATCHERS_H_
#define AUTOACCEL_TESTS_TEST_MATCHERS_H_

#include "gmock/gmock.h"

namespace autoaccel {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

}  // namespace autoaccel

#endif  // AUTOACCEL_TESTS_TEST_MATCHERS_H_
