// The store's tables as data. Each table (jobs, trials, strategies) is one
// list of columns, each naming its SQLite column and the record field it
// holds; that list drives the SQL column lists (SELECT, INSERT, upsert,
// UPDATE) and the code that binds a record and reads a row back. Adding a
// column is one line in a list below plus the migration that adds it to the
// file (server/store/store_schema.cc). Internal to the store.
//
// Contract:
//  - columns[0] of every table is its TEXT primary key.
//  - Bind* fill parameters ?1..?N in column order; a statement built by
//    InsertSql/UpdateSql expects exactly that.
//  - ReadRow reads the columns of a statement built by SelectSql; a value
//    that cannot be decoded gives DATA_LOSS "store: <noun> '<key>': <why>".
//  - Pure functions of their arguments; any thread.
#ifndef AUTOACCEL_SERVER_STORE_STORE_COLUMNS_H_
#define AUTOACCEL_SERVER_STORE_STORE_COLUMNS_H_

#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/job_state.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/store/store.h"
#include "server/store/store_sqlite.h"
#include "spec/trial.h"

namespace autoaccel::store_internal {

// How a field of C++ type T is kept in one column. Bind writes it as the
// statement's next parameter; Read fills it from column `col` of the current
// row, or says why it cannot (naming `column` where that helps).
template <typename T>
struct ColumnCodec;

template <>
struct ColumnCodec<std::string> {
  static void Bind(Statement& s, const std::string& v) { s.Bind(v); }
  static absl::Status Read(const Statement& s, int col, const char*, std::string* v) {
    *v = s.Text(col);
    return absl::OkStatus();
  }
};

template <>
struct ColumnCodec<int> {
  static void Bind(Statement& s, int v) { s.Bind(v); }
  static absl::Status Read(const Statement& s, int col, const char*, int* v) {
    *v = s.Int(col);
    return absl::OkStatus();
  }
};

// INTEGER 0 or 1.
template <>
struct ColumnCodec<bool> {
  static void Bind(Statement& s, bool v) { s.Bind(v ? 1 : 0); }
  static absl::Status Read(const Statement& s, int col, const char*, bool* v) {
    *v = s.Int(col) != 0;
    return absl::OkStatus();
  }
};

// INTEGER microseconds since the epoch (see Statement::Bind(absl::Time)).
template <>
struct ColumnCodec<absl::Time> {
  static void Bind(Statement& s, absl::Time v) { s.Bind(v); }
  static absl::Status Read(const Statement& s, int col, const char*, absl::Time* v) {
    *v = s.Time(col);
    return absl::OkStatus();
  }
};

// TEXT: JobStateName.
template <>
struct ColumnCodec<JobState> {
  static void Bind(Statement& s, JobState v);
  static absl::Status Read(const Statement& s, int col, const char* column, JobState* v);
};

// TEXT: TrialStatusName.
template <>
struct ColumnCodec<TrialStatus> {
  static void Bind(Statement& s, TrialStatus v);
  static absl::Status Read(const Statement& s, int col, const char* column, TrialStatus* v);
};

// TEXT: TrialMetricsToJson, dumped.
template <>
struct ColumnCodec<TrialMetrics> {
  static void Bind(Statement& s, const TrialMetrics& v);
  static absl::Status Read(const Statement& s, int col, const char* column, TrialMetrics* v);
};

// A value kept as a JSON object: its spec/trial.h codec.
template <typename T>
struct JsonForm;
template <>
struct JsonForm<TrialPrediction> {
  static nlohmann::json To(const TrialPrediction& v) { return TrialPredictionToJson(v); }
  static absl::StatusOr<TrialPrediction> From(const nlohmann::json& j) {
    return TrialPredictionFromJson(j);
  }
};
template <>
struct JsonForm<ProxyMeasurement> {
  static nlohmann::json To(const ProxyMeasurement& v) { return ProxyMeasurementToJson(v); }
  static absl::StatusOr<ProxyMeasurement> From(const nlohmann::json& j) {
    return ProxyMeasurementFromJson(j);
  }
};

// TEXT: JsonForm<T>'s JSON, dumped; '' for nullopt. (Only for the types
// with a JsonForm: TrialPrediction, ProxyMeasurement.)
template <typename T>
struct ColumnCodec<std::optional<T>> {
  static void Bind(Statement& s, const std::optional<T>& v) {
    s.Bind(v ? JsonForm<T>::To(*v).dump() : std::string());
  }
  static absl::Status Read(const Statement& s, int col, const char* column, std::optional<T>* v) {
    const std::string text = s.Text(col);
    if (text.empty()) {
      *v = std::nullopt;
      return absl::OkStatus();
    }
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return absl::DataLossError(absl::StrCat(column, " is not valid JSON"));
    absl::StatusOr<T> parsed = JsonForm<T>::From(j);
    if (!parsed.ok()) return parsed.status();
    *v = *std::move(parsed);
    return absl::OkStatus();
  }
};

// TEXT: a JSON array of strings (entries that are not strings are skipped).
template <>
struct ColumnCodec<std::vector<std::string>> {
  static void Bind(Statement& s, const std::vector<std::string>& v);
  static absl::Status Read(const Statement& s, int col, const char* column,
                           std::vector<std::string>* v);
};

// TEXT: a JSON object of the certainty's fields; '' for an empty certainty.
template <>
struct ColumnCodec<AnswerCertainty> {
  static void Bind(Statement& s, const AnswerCertainty& v);
  static absl::Status Read(const Statement& s, int col, const char* column, AnswerCertainty* v);
};

// One column of a table whose rows are `Record`s.
template <typename Record>
struct Column {
  const char* name;  // the SQLite column
  void (*bind)(Statement&, const Record&);
  absl::Status (*read)(const Statement&, int col, const char* name, Record&);
};

// The record type and field type of a pointer to a data member (declared
// only, for decltype).
template <typename R, typename T>
R RecordOf(T R::*);
template <typename R, typename T>
T FieldTypeOf(T R::*);

// The column `name` holding the field `kField` (e.g. &JobRecord::state),
// kept by the ColumnCodec of the field's type.
template <auto kField>
constexpr Column<decltype(RecordOf(kField))> Field(const char* name) {
  using R = decltype(RecordOf(kField));
  using T = decltype(FieldTypeOf(kField));
  return {name, [](Statement& s, const R& r) { ColumnCodec<T>::Bind(s, r.*kField); },
          [](const Statement& s, int col, const char* column, R& r) {
            return ColumnCodec<T>::Read(s, col, column, &(r.*kField));
          }};
}

template <typename Record>
struct Table {
  const char* name;  // the SQLite table
  const char* noun;  // names a row in errors: "store: job 'j1': ..."
  const Column<Record>* columns;
  size_t size;
  const Column<Record>& key() const { return columns[0]; }
};

// ---- The tables -------------------------------------------------------------
// Column order is free (statements name their columns); names are the
// schema's, which migrations fix.

inline constexpr Column<JobRecord> kJobColumns[] = {
    Field<&JobRecord::job_id>("job_id"),
    Field<&JobRecord::state>("state"),
    Field<&JobRecord::status_message>("status_message"),
    Field<&JobRecord::request_json>("request_json"),
    Field<&JobRecord::signature>("signature"),
    Field<&JobRecord::created_at>("created_at"),
    Field<&JobRecord::started_at>("started_at"),
    Field<&JobRecord::finished_at>("finished_at"),
    Field<&JobRecord::deadline>("deadline"),
    Field<&JobRecord::best_trial_id>("best_trial_id"),
    Field<&JobRecord::trials_total>("trials_total"),
    Field<&JobRecord::algorithm>("algorithm"),          // schema 2
    Field<&JobRecord::answered_from>("answered_from"),  // schema 5
    Field<&JobRecord::launcher_json>("launcher_json"),  // schema 7
    Field<&JobRecord::owner>("owner"),                  // schema 8
    Field<&JobRecord::model_json>("model_json"),        // schema 11
};
inline constexpr Table<JobRecord> kJobs{"jobs", "job", kJobColumns, std::size(kJobColumns)};

inline constexpr Column<TrialRecord> kTrialColumns[] = {
    Field<&TrialRecord::trial_id>("trial_id"),
    Field<&TrialRecord::job_id>("job_id"),
    Field<&TrialRecord::index>("idx"),
    Field<&TrialRecord::attempt>("attempt"),
    Field<&TrialRecord::strategy_text>("strategy_text"),
    Field<&TrialRecord::strategy_json>("strategy_json"),
    Field<&TrialRecord::status>("status"),
    Field<&TrialRecord::reason>("reason"),
    Field<&TrialRecord::metrics>("metrics_json"),
    Field<&TrialRecord::worker_id>("worker_id"),
    Field<&TrialRecord::started_at>("started_at"),
    Field<&TrialRecord::finished_at>("finished_at"),
    Field<&TrialRecord::failed_attempts>("failed_attempts"),  // schema 3
    Field<&TrialRecord::infrastructure>("infrastructure"),    // schema 3
    Field<&TrialRecord::confirms>("confirms"),                // schema 3
    Field<&TrialRecord::predicted>("predicted_json"),         // schema 6
    Field<&TrialRecord::measured_steps>("measured_steps"),    // schema 9
    Field<&TrialRecord::proxy>("proxy_json"),                 // schema 12
    Field<&TrialRecord::full_size>("full_size"),              // schema 12
};
inline constexpr Table<TrialRecord> kTrials{"trials", "trial", kTrialColumns,
                                            std::size(kTrialColumns)};

inline constexpr Column<StrategyRecord> kStrategyColumns[] = {
    Field<&StrategyRecord::signature>("signature"),
    Field<&StrategyRecord::model_family>("model_family"),
    Field<&StrategyRecord::model_config_json>("model_config_json"),
    Field<&StrategyRecord::seq_len>("seq_len"),
    Field<&StrategyRecord::global_batch_size>("global_batch_size"),
    Field<&StrategyRecord::hardware>("hardware"),
    Field<&StrategyRecord::strategy_text>("strategy_text"),
    Field<&StrategyRecord::strategy_json>("strategy_json"),
    Field<&StrategyRecord::metrics>("metrics_json"),
    Field<&StrategyRecord::job_id>("job_id"),
    Field<&StrategyRecord::updated_at>("updated_at"),
    Field<&StrategyRecord::confirmed>("confirmed"),            // schema 3
    Field<&StrategyRecord::engine_version>("engine_version"),  // schema 5
    Field<&StrategyRecord::created_at>("created_at"),          // schema 5
    Field<&StrategyRecord::device_type>("device_type"),        // schema 5
    Field<&StrategyRecord::certainty>("certainty_json"),       // schema 10
};
inline constexpr Table<StrategyRecord> kStrategies{"strategies", "strategy", kStrategyColumns,
                                                   std::size(kStrategyColumns)};

// ---- SQL from a table -------------------------------------------------------

// "a, b, c": every column, in table order.
template <typename Record>
std::string ColumnList(const Table<Record>& t) {
  std::string out;
  for (size_t i = 0; i < t.size; ++i) absl::StrAppend(&out, i == 0 ? "" : ", ", t.columns[i].name);
  return out;
}

// "SELECT <every column> FROM <table> <rest>", e.g. rest = "WHERE job_id = ?1".
template <typename Record>
std::string SelectSql(const Table<Record>& t, absl::string_view rest) {
  return absl::StrCat("SELECT ", ColumnList(t), " FROM ", t.name, " ", rest);
}

enum class OnConflict {
  kDoNothing,  // a row with the key stays as it is (sqlite3_changes() is 0)
  kReplace,    // every other column of the row with the key is overwritten
};

// "INSERT INTO <table> (<every column>) VALUES (?1, ..., ?N) ON CONFLICT ...".
template <typename Record>
std::string InsertSql(const Table<Record>& t, OnConflict on_conflict) {
  std::string sql = absl::StrCat("INSERT INTO ", t.name, " (", ColumnList(t), ") VALUES (");
  for (size_t i = 0; i < t.size; ++i) absl::StrAppend(&sql, i == 0 ? "?" : ", ?", i + 1);
  absl::StrAppend(&sql, ") ON CONFLICT(", t.key().name, ") DO ");
  if (on_conflict == OnConflict::kDoNothing) return absl::StrCat(sql, "NOTHING");
  absl::StrAppend(&sql, "UPDATE SET ");
  for (size_t i = 1; i < t.size; ++i) {
    absl::StrAppend(&sql, i == 1 ? "" : ", ", t.columns[i].name, " = excluded.", t.columns[i].name);
  }
  return sql;
}

// "UPDATE <table> SET <column i> = ?i, ... WHERE <key> = ?1".
template <typename Record>
std::string UpdateSql(const Table<Record>& t) {
  std::string sql = absl::StrCat("UPDATE ", t.name, " SET ");
  for (size_t i = 1; i < t.size; ++i) {
    absl::StrAppend(&sql, i == 1 ? "" : ", ", t.columns[i].name, " = ?", i + 1);
  }
  return absl::StrCat(sql, " WHERE ", t.key().name, " = ?1");
}

// ---- Rows -------------------------------------------------------------------

// Binds every column of `record`, in table order, as the next parameters.
template <typename Record>
void BindRow(Statement& s, const Table<Record>& t, const Record& record) {
  for (size_t i = 0; i < t.size; ++i) t.columns[i].bind(s, record);
}

// The current row of a statement built by SelectSql(t, ...).
template <typename Record>
absl::StatusOr<Record> ReadRow(const Statement& s, const Table<Record>& t) {
  Record record;
  for (size_t i = 0; i < t.size; ++i) {
    const int col = static_cast<int>(i);
    if (absl::Status st = t.columns[i].read(s, col, t.columns[i].name, record); !st.ok()) {
      return absl::DataLossError(
          absl::StrCat("store: ", t.noun, " '", s.Text(0), "': ", st.message()));
    }
  }
  return record;
}

// Steps a statement built by SelectSql(t, ...) to its end, reading each row.
template <typename Record>
absl::StatusOr<std::vector<Record>> ReadRows(Statement& s, const Table<Record>& t) {
  std::vector<Record> records;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(Record record, ReadRow(s, t));
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace autoaccel::store_internal

#endif  // AUTOACCEL_SERVER_STORE_STORE_COLUMNS_H_
