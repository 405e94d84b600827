// One QAbstractTableModel over a planner::Plan: the layouts table and the breakdown and memory
// charts all read it (through the same filter proxy), so they always show the same rows.
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <memory>
#include <optional>

#include "planner/plan.hpp"

namespace moeplan::gui {

class PlanTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    kRank,
    kLayout,
    kDispatcher,
    kMapping,
    kRouter,
    kDispatch,
    kExperts,
    kCombine,
    kTp,
    kShared,
    kLayerTime,
    kAttention,
    kStepTime,
    kThroughput,
    kMemory,
    kCapacity,
    kImbalance,
    kSlots,
    kFits,
    kNumColumns
  };
  /// The raw value behind a cell: seconds, bytes, tokens/s, or the text for text columns.
  static constexpr int kValueRole = Qt::UserRole;
  /// The row's index into Plan::layouts.
  static constexpr int kLayoutIndexRole = Qt::UserRole + 1;
  /// true on the recommended layout's row.
  static constexpr int kRecommendedRole = Qt::UserRole + 2;

  explicit PlanTableModel(QObject* parent = nullptr);

  void setPlan(std::shared_ptr<const planner::Plan> plan);
  const planner::Plan* plan() const { return plan_.get(); }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::shared_ptr<const planner::Plan> plan_;
};

/// Sorts by kValueRole and filters rows: feasible only, one dispatcher, one mapping.
class LayoutFilterModel : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit LayoutFilterModel(QObject* parent = nullptr);
  void setFeasibleOnly(bool on);
  void setDispatcher(std::optional<planner::Dispatcher> d);
  void setMapping(std::optional<planner::RankMapping> m);

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

 private:
  bool feasibleOnly_ = false;
  std::optional<planner::Dispatcher> dispatcher_;
  std::optional<planner::RankMapping> mapping_;
};

}  // namespace moeplan::gui
