// The plan table model and its filter.
#include "app/gui/plan_table_model.hpp"

#include <algorithm>

#include <QBrush>
#include <QColor>
#include <QFont>

#include "app/gui/session.hpp"

namespace moeplan::gui {

PlanTableModel::PlanTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlanTableModel::setPlan(std::shared_ptr<const planner::Plan> plan) {
  beginResetModel();
  plan_ = std::move(plan);
  endResetModel();
}

int PlanTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !plan_ ? 0 : static_cast<int>(plan_->layouts.size());
}

int PlanTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kNumColumns;
}

QVariant PlanTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  static const char* const kHeaders[kNumColumns] = {"#",
                                                    "layout",
                                                    "dispatcher",
                                                    "mapping",
                                                    "router\n(ms)",
                                                    "dispatch\n(ms)",
                                                    "experts\n(ms)",
                                                    "combine\n(ms)",
                                                    "TP\n(ms)",
                                                    "shared\n(ms)",
                                                    "layer\n(ms)",
                                                    "attn\n(ms)",
                                                    "step\n(ms)",
                                                    "tokens/s\n/GPU",
                                                    "memory\n(GiB/GPU)",
                                                    "HBM\n(GiB)",
                                                    "load\nmax/mean",
                                                    "slots\n(/GPU)",
                                                    "fits"};
  if (role == Qt::DisplayRole) return QString::fromUtf8(kHeaders[section]);
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case kLayerTime:
        return tr(
            "Predicted time of one MoE layer (mean over layers), from the cost source the header "
            "names");
      case kAttention:
        return tr(
            "One layer's attention block: norms, projections, the attention core at the plan's "
            "context, the output projection and its TP all-reduce");
      case kStepTime:
        return tr(
            "One forward of the whole model: every layer's attention and MoE (or dense MLP) "
            "block and the head; the time to first token in prefill, per output token in decode");
      case kMemory: return tr("Bytes per GPU without the KV cache");
      case kCapacity: return tr("The device's HBM capacity");
      case kImbalance: return tr("Max / mean routed pairs per EP rank (mean over layers)");
      case kSlots:
        return tr(
            "Expert slots per MoE layer, experts plus redundant replicas (per GPU): with "
            "redundant slots an EP size is legal when the slots divide evenly");
      default: break;
    }
  }
  return {};
}

QVariant PlanTableModel::data(const QModelIndex& index, int role) const {
  if (!plan_ || !index.isValid()) return {};
  const auto row = static_cast<std::size_t>(index.row());
  const planner::LayoutCost& c = plan_->layouts[row];
  const planner::LayerCost& p = c.per_layer;
  const bool recommended = index.row() == plan_->recommended;
  if (role == kLayoutIndexRole) return index.row();
  if (role == kRecommendedRole) return recommended;
  const planner::CostItem* item = nullptr;
  switch (index.column()) {
    case kRouter: item = &p.router; break;
    case kDispatch: item = &p.dispatch; break;
    case kExperts: item = &p.experts; break;
    case kCombine: item = &p.combine; break;
    case kTp: item = &p.tp; break;
    case kShared: item = &p.shared; break;
    case kAttention: item = &c.dense.attention; break;
    default: break;
  }
  if (role == kValueRole || role == Qt::DisplayRole) {
    const bool display = role == Qt::DisplayRole;
    if (item != nullptr) {
      return display ? QVariant(QString::number(item->seconds * 1e3, 'f', 3))
                     : QVariant(item->seconds);
    }
    switch (index.column()) {
      case kRank: return index.row() + 1;
      case kLayout: return QString::fromStdString(c.layout.shape_name());
      case kDispatcher:
        return QString::fromStdString(planner::dispatcher_name(c.layout.dispatcher) +
                                      (c.layout.tbo ? " +tbo" : ""));
      case kMapping: return QString::fromStdString(planner::mapping_name(c.layout.mapping));
      case kLayerTime:
        return display ? QVariant(QString::number(p.total() * 1e3, 'f', 3)) : QVariant(p.total());
      case kStepTime:
        return display ? QVariant(QString::number(c.step_seconds * 1e3, 'f', 3))
                       : QVariant(c.step_seconds);
      case kThroughput:
        return display ? QVariant(QString::number(c.tokens_per_s_per_gpu, 'f', 0))
                       : QVariant(c.tokens_per_s_per_gpu);
      case kMemory:
        return display ? QVariant(
                             QString::number(c.memory.total() / (1024.0 * 1024.0 * 1024.0), 'f', 2))
                       : QVariant(c.memory.total());
      case kCapacity:
        return display ? QVariant(QString::number(c.memory_capacity / (1024.0 * 1024.0 * 1024.0),
                                                  'f', 1))
                       : QVariant(c.memory_capacity);
      case kImbalance:
        return display ? QVariant(QString::number(c.imbalance, 'f', 3)) : QVariant(c.imbalance);
      case kSlots:
        return display ? QVariant(QStringLiteral("%1 (%2)")
                                      .arg(c.num_slots)
                                      .arg(c.num_slots / std::max(1, c.layout.ep_size)))
                       : QVariant(c.num_slots);
      case kFits:
        return display ? QVariant(c.feasible ? tr("yes") : tr("no")) : QVariant(c.feasible);
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    if (item != nullptr) {
      return tr("%1, source: %2")
          .arg(formatMs(item->seconds), QString::fromStdString(item->source));
    }
    if (index.column() == kFits && !c.infeasible_reason.empty()) {
      // Why its dispatcher cannot run, e.g. deepep_ll's buffer (naming the field to change).
      return errorText(Error{c.infeasible_reason});
    }
    if (index.column() == kMemory) {
      const auto& m = c.memory;
      return tr("experts %1, shared %2, dense %3, buffers %4, activations %5 (of %6 HBM)")
          .arg(formatGiB(m.experts), formatGiB(m.shared), formatGiB(m.dense), formatGiB(m.buffers),
               formatGiB(m.activations), formatGiB(c.memory_capacity));
    }
    return tr("cost source: %1").arg(QString::fromStdString(plan_->cost_source));
  }
  if (role == Qt::TextAlignmentRole) {
    const bool text = index.column() == kLayout || index.column() == kDispatcher ||
                      index.column() == kMapping || index.column() == kFits;
    return QVariant::fromValue(Qt::AlignVCenter | (text ? Qt::AlignLeft : Qt::AlignRight));
  }
  if (role == Qt::BackgroundRole && recommended) return QBrush(QColor(0xd7, 0xf0, 0xd2));
  if (role == Qt::ForegroundRole && !c.feasible) return QBrush(QColor(0x9e, 0x1c, 0x1c));
  if (role == Qt::FontRole && recommended) {
    QFont f;
    f.setBold(true);
    return f;
  }
  return {};
}

LayoutFilterModel::LayoutFilterModel(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(PlanTableModel::kValueRole);
}

void LayoutFilterModel::setFeasibleOnly(bool on) {
  feasibleOnly_ = on;
  invalidateFilter();
}

void LayoutFilterModel::setDispatcher(std::optional<planner::Dispatcher> d) {
  dispatcher_ = d;
  invalidateFilter();
}

void LayoutFilterModel::setMapping(std::optional<planner::RankMapping> m) {
  mapping_ = m;
  invalidateFilter();
}

bool LayoutFilterModel::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  const auto* m = qobject_cast<const PlanTableModel*>(sourceModel());
  if (m == nullptr || m->plan() == nullptr || sourceParent.isValid()) return true;
  const auto& c = m->plan()->layouts[static_cast<std::size_t>(sourceRow)];
  if (feasibleOnly_ && !c.feasible) return false;
  if (dispatcher_ && c.layout.dispatcher != *dispatcher_) return false;
  if (mapping_ && c.layout.mapping != *mapping_) return false;
  return true;
}

}  // namespace moeplan::gui
