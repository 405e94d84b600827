// The Serving view: the serving plan of `moeplan plan --disagg` — aggregated instances against
// disaggregated prefill and decode pools (x prefill and y decode instances, each with its own
// layout) for a GPU budget, the workload's requests and latency targets — as a table of both
// deployments, the recommendation with its reasons, and the KV cache sent between the pools.
#pragma once

#include <QWidget>

class QDoubleSpinBox;
class QLineEdit;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace moeplan::gui {

class Session;

class ServingView : public QWidget {
  Q_OBJECT

 public:
  explicit ServingView(Session* session, QWidget* parent = nullptr);

  /// Plans serving with the view's targets and budget (Session::planServing); false when it was
  /// refused before any work (the error shows).
  bool start();

  QDoubleSpinBox* ttftSpin() const { return ttft_; }
  QDoubleSpinBox* tpotSpin() const { return tpot_; }
  /// GPUs for the whole deployment; 0: the cluster's.
  QSpinBox* budgetSpin() const { return budget_; }
  /// Requests/s offered (Poisson arrivals); 0: the most the budget serves.
  QDoubleSpinBox* rateSpin() const { return rate_; }
  /// The TTFT target's percentile; 0: the mean.
  QDoubleSpinBox* percentileSpin() const { return percentile_; }
  /// Decode batches per GPU to sweep, comma-separated; empty: the powers of 2 from 1 to 1024.
  QLineEdit* batchesEdit() const { return batches_; }
  QPushButton* planButton() const { return plan_; }
  QPushButton* cancelButton() const { return cancel_; }
  QProgressBar* progress() const { return progress_; }
  /// What the shown plan was made from (model, cluster, budget, requests, targets, cost source).
  QLabel* header() const { return header_; }
  QLabel* errorLabel() const { return error_; }
  /// One row per pool: disaggregated prefill and decode, aggregated (the CLI's table).
  QTableWidget* table() const { return table_; }
  /// The recommended deployment, its reasons and the KV transfer between the pools.
  QLabel* recommendation() const { return recommendation_; }

 private:
  void showResult();

  Session* session_;
  QDoubleSpinBox* ttft_ = nullptr;
  QDoubleSpinBox* tpot_ = nullptr;
  QSpinBox* budget_ = nullptr;
  QDoubleSpinBox* rate_ = nullptr;
  QDoubleSpinBox* percentile_ = nullptr;
  QLineEdit* batches_ = nullptr;
  QPushButton* plan_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* header_ = nullptr;
  QLabel* error_ = nullptr;
  QTableWidget* table_ = nullptr;
  QLabel* recommendation_ = nullptr;
};

}  // namespace moeplan::gui
