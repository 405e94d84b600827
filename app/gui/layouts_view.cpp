// The layouts view.
#include "app/gui/layouts_view.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "app/gui/charts.hpp"
#include "app/gui/plan_table_model.hpp"
#include "app/gui/session.hpp"
#include "models/file_io.hpp"

namespace moeplan::gui {

LayoutsView::LayoutsView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* layout = new QVBoxLayout(this);
  header_ = new QLabel(this);
  header_->setWordWrap(true);
  layout->addWidget(header_);

  auto* filters = new QHBoxLayout();
  feasible_ = new QCheckBox(tr("&Feasible only"), this);
  feasible_->setToolTip(tr("Hide layouts whose memory per GPU exceeds the device's HBM"));
  filters->addWidget(feasible_);
  filters->addWidget(new QLabel(tr("Dispatcher:"), this));
  dispatcher_ = new QComboBox(this);
  dispatcher_->addItem(tr("all"));
  for (auto d : planner::kAllDispatchers) {
    dispatcher_->addItem(QString::fromStdString(planner::dispatcher_name(d)));
  }
  filters->addWidget(dispatcher_);
  filters->addWidget(new QLabel(tr("Mapping:"), this));
  mapping_ = new QComboBox(this);
  mapping_->addItems({tr("all"), QStringLiteral("tp_innermost"), QStringLiteral("ep_innermost")});
  filters->addWidget(mapping_);
  filters->addWidget(new QLabel(tr("Two-batch overlap:"), this));
  overlap_ = new QComboBox(this);
  overlap_->addItems({QStringLiteral("off"), QStringLiteral("on"), QStringLiteral("both")});
  overlap_->setToolTip(
      tr("Plan every layout as two overlapped micro-batches (on), or with and without (both); "
         "as moeplan plan --tbo"));
  filters->addWidget(overlap_);
  filters->addStretch(1);
  auto* save = new QPushButton(tr("Save plan &JSON…"), this);
  save->setToolTip(tr("Every layout as JSON, as `moeplan plan --json` writes it"));
  filters->addWidget(save);
  layout->addLayout(filters);

  error_ = new QLabel(this);
  error_->setStyleSheet(QStringLiteral("color: #b00020;"));
  error_->setWordWrap(true);
  error_->hide();
  layout->addWidget(error_);

  model_ = new PlanTableModel(this);
  filter_ = new LayoutFilterModel(this);
  filter_->setSourceModel(model_);

  auto* split = new QSplitter(Qt::Vertical, this);
  auto* top = new QWidget(split);
  auto* tl = new QHBoxLayout(top);
  tl->setContentsMargins(0, 0, 0, 0);
  table_ = new QTableView(top);
  table_->setModel(filter_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(PlanTableModel::kRank, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(22);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setAlternatingRowColors(true);
  tl->addWidget(table_, 3);
  recommendation_ = new QLabel(top);
  recommendation_->setWordWrap(true);
  recommendation_->setTextFormat(Qt::RichText);
  recommendation_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  recommendation_->setMinimumWidth(260);
  recommendation_->setMaximumWidth(340);
  recommendation_->setStyleSheet(
      QStringLiteral("QLabel { background: #eef7ec; border: 1px solid #9ccc94; padding: 6px; }"));
  tl->addWidget(recommendation_, 1);

  auto* charts = new QWidget(split);
  auto* cl = new QHBoxLayout(charts);
  cl->setContentsMargins(0, 0, 0, 0);
  breakdown_ = new BreakdownChart(charts);
  memory_ = new MemoryChart(charts);
  breakdown_->setModel(filter_, model_);
  memory_->setModel(filter_, model_);
  cl->addWidget(breakdown_, 3);
  cl->addWidget(memory_, 2);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  layout->addWidget(split, 1);

  connect(feasible_, &QCheckBox::toggled, this, &LayoutsView::onFilterChanged);
  connect(dispatcher_, &QComboBox::currentIndexChanged, this, &LayoutsView::onFilterChanged);
  connect(mapping_, &QComboBox::currentIndexChanged, this, &LayoutsView::onFilterChanged);
  connect(save, &QPushButton::clicked, this, &LayoutsView::onSave);
  connect(overlap_, &QComboBox::currentTextChanged, this,
          [this](const QString& mode) { session_->setTwoBatchOverlap(mode.toStdString()); });
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (current.isValid()) {
              session_->selectLayout(current.data(PlanTableModel::kLayoutIndexRole).toInt());
            }
          });
  connect(session_, &Session::planFinished, this, &LayoutsView::onPlanFinished);
  connect(session_, &Session::planStarted, this,
          [this] { header_->setText(tr("Planning… (the table shows the previous plan)")); });
  onPlanFinished();
}

void LayoutsView::onFilterChanged() {
  filter_->setFeasibleOnly(feasible_->isChecked());
  const int d = dispatcher_->currentIndex();
  filter_->setDispatcher(
      d <= 0 ? std::nullopt : std::optional<planner::Dispatcher>(planner::kAllDispatchers[d - 1]));
  const int m = mapping_->currentIndex();
  filter_->setMapping(
      m <= 0 ? std::nullopt
             : std::optional<planner::RankMapping>(m == 1 ? planner::RankMapping::kTpInnermost
                                                          : planner::RankMapping::kEpInnermost));
}

void LayoutsView::onPlanFinished() {
  const auto plan = session_->plan();
  model_->setPlan(plan);
  error_->setText(session_->planError());
  error_->setVisible(!session_->planError().isEmpty());
  if (!plan) {
    header_->setText(tr("No plan."));
    recommendation_->setText(QString());
    return;
  }
  header_->setText(
      tr("<b>%1</b> on <b>%2</b>: %3 GPUs × %4, %5, %6 %7 per GPU, %8 MoE layers. Cost source: "
         "<b>%9</b>; expert load: %10; placement: %11. Times in ms per MoE layer; step = all MoE "
         "layers; memory excludes the KV cache.")
          .arg(QString::fromStdString(plan->model), QString::fromStdString(plan->cluster))
          .arg(plan->num_gpus)
          .arg(QString::fromStdString(plan->device),
               QString::fromStdString(planner::phase_name(plan->workload.phase)))
          .arg(plan->workload.tokens_per_gpu)
          .arg(plan->workload.phase == planner::Phase::kPrefill ? tr("tokens") : tr("sequences"))
          .arg(plan->num_moe_layers)
          .arg(QString::fromStdString(plan->cost_source), QString::fromStdString(plan->load_source),
               QString::fromStdString(plan->placement_policy)));
  QString rec;
  if (plan->recommended >= 0) {
    const auto& c = plan->layouts[static_cast<std::size_t>(plan->recommended)];
    rec = tr("<b>Recommended:</b> %1 %2 %3<br>%4 per MoE layer, %5 per step, %6 tokens/s/GPU, "
             "%7 of %8 per GPU (%9)")
              .arg(QString::fromStdString(c.layout.shape_name()),
                   QString::fromStdString(planner::dispatcher_name(c.layout.dispatcher)),
                   QString::fromStdString(planner::mapping_name(c.layout.mapping)),
                   formatMs(c.per_layer.total()), formatMs(c.step_seconds),
                   QString::number(c.tokens_per_s_per_gpu, 'f', 0), formatGiB(c.memory.total()),
                   formatGiB(c.memory_capacity), QString::fromStdString(plan->cost_source));
  } else {
    rec = tr("<b>No layout fits in memory.</b>");
  }
  rec += QStringLiteral("<ul style='margin-left:-20px'>");
  for (const auto& r : plan->reasons) {
    rec += QStringLiteral("<li>%1</li>").arg(QString::fromStdString(r).toHtmlEscaped());
  }
  rec += QStringLiteral("</ul>");
  recommendation_->setText(rec);
  // Select the recommended row.
  for (int r = 0; r < filter_->rowCount(); ++r) {
    const QModelIndex i = filter_->index(r, 0);
    if (i.data(PlanTableModel::kLayoutIndexRole).toInt() == session_->selectedLayout()) {
      table_->setCurrentIndex(i);
      table_->scrollTo(i);
      break;
    }
  }
}

bool LayoutsView::savePlanJson(const QString& path) {
  const auto plan = session_->plan();
  if (!plan) {
    error_->setText(tr("No plan to save."));
    error_->show();
    return false;
  }
  const Status s =
      write_file_atomic(path.toStdString(), planner::plan_to_json(*plan, 0, true).dump(2) + "\n");
  error_->setText(s.ok() ? QString() : errorText(s.error()));
  error_->setVisible(!s.ok());
  return s.ok();
}

void LayoutsView::onSave() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Save the plan JSON"), QString(), tr("JSON (*.json)"));
  if (!path.isEmpty()) savePlanJson(path);
}

}  // namespace moeplan::gui
