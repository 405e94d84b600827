// The layouts view.
#include "app/gui/layouts_view.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "app/gui/charts.hpp"
#include "app/gui/plan_table_model.hpp"
#include "app/gui/session.hpp"
#include "models/file_io.hpp"
#include "planner/costs/cost_model.hpp"
#include "planner/plan_request.hpp"

namespace moeplan::gui {

LayoutsView::LayoutsView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* layout = new QVBoxLayout(this);
  header_ = new QLabel(this);
  header_->setWordWrap(true);
  layout->addWidget(header_);
  costWarning_ = new QLabel(this);
  costWarning_->setWordWrap(true);
  costWarning_->setStyleSheet(
      QStringLiteral("QLabel { color: #7a3e00; background: #fff3cd; border: 1px solid #e0b84c; "
                     "padding: 3px; }"));
  costWarning_->hide();
  layout->addWidget(costWarning_);

  auto* filters = new QHBoxLayout();
  feasible_ = new QCheckBox(tr("Feasible onl&y"), this);
  feasible_->setToolTip(
      tr("Hide layouts that do not fit in the device's HBM or cannot run their dispatcher"));
  filters->addWidget(feasible_);
  auto* dispatcherLabel = new QLabel(tr("&Dispatcher:"), this);
  filters->addWidget(dispatcherLabel);
  dispatcher_ = new QComboBox(this);
  dispatcherLabel->setBuddy(dispatcher_);
  dispatcher_->addItem(tr("all"));
  for (auto d : planner::kAllDispatchers) {
    dispatcher_->addItem(QString::fromStdString(planner::dispatcher_name(d)));
  }
  filters->addWidget(dispatcher_);
  auto* mappingLabel = new QLabel(tr("Mapp&ing:"), this);
  filters->addWidget(mappingLabel);
  mapping_ = new QComboBox(this);
  mappingLabel->setBuddy(mapping_);
  mapping_->addItems({tr("all"), QStringLiteral("tp_innermost"), QStringLiteral("ep_innermost")});
  filters->addWidget(mapping_);
  filters->addWidget(new QLabel(tr("Two-batch overlap:"), this));
  overlap_ = new QComboBox(this);
  overlap_->addItems({QStringLiteral("off"), QStringLiteral("on"), QStringLiteral("both")});
  overlap_->setToolTip(
      tr("Plan every layout as two overlapped micro-batches (on), or with and without (both); "
         "as moeplan plan --tbo"));
  filters->addWidget(overlap_);
  auto* llLabel = new QLabel(tr("DeepEP-LL b&uffer:"), this);
  filters->addWidget(llLabel);
  llMaxTokens_ = new QSpinBox(this);
  llLabel->setBuddy(llMaxTokens_);
  llMaxTokens_->setRange(1, planner::kMaxLlTokensPerRank);
  llMaxTokens_->setValue(planner::kDefaultLlMaxTokensPerRank);
  llMaxTokens_->setSuffix(tr(" tokens/rank"));
  llMaxTokens_->setKeyboardTracking(false);
  llMaxTokens_->setToolTip(
      tr("deepep_ll's buffer: the most tokens one rank dispatches per step (default 128, "
         "SGLang's); a layout whose ranks dispatch more cannot run deepep_ll. As moeplan plan "
         "--ll-max-tokens"));
  filters->addWidget(llMaxTokens_);
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
  hiddenNote_ = new QLabel(this);
  hiddenNote_->setWordWrap(true);
  hiddenNote_->setStyleSheet(QStringLiteral("color: #8a5a00;"));
  hiddenNote_->hide();
  layout->addWidget(hiddenNote_);

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
  tl->addWidget(table_, 1);
  // The recommendation sits beside the charts, so the table has the window's whole width.
  recommendation_ = new QLabel(this);
  recommendation_->setWordWrap(true);
  recommendation_->setTextFormat(Qt::RichText);
  recommendation_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  recommendation_->setStyleSheet(
      QStringLiteral("QLabel { background: #eef7ec; border: 1px solid #9ccc94; padding: 6px; }"));
  // Its reasons can outgrow the charts' height (1366×768): it scrolls rather than being cut.
  auto* recommendationScroll = new QScrollArea(this);
  recommendationScroll->setWidget(recommendation_);
  recommendationScroll->setWidgetResizable(true);
  recommendationScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  recommendationScroll->setFrameShape(QFrame::NoFrame);
  recommendationScroll->setMinimumWidth(220);
  recommendationScroll->setMaximumWidth(360);

  auto* charts = new QWidget(split);
  auto* cl = new QHBoxLayout(charts);
  cl->setContentsMargins(0, 0, 0, 0);
  breakdown_ = new BreakdownChart(charts);
  memory_ = new MemoryChart(charts);
  breakdown_->setModel(filter_, model_);
  memory_->setModel(filter_, model_);
  pareto_ = new ParetoChart(charts);
  pareto_->hide();
  cl->addWidget(breakdown_, 3);
  cl->addWidget(memory_, 2);
  cl->addWidget(pareto_, 2);
  cl->addWidget(recommendationScroll, 1);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  layout->addWidget(split, 1);

  connect(feasible_, &QCheckBox::toggled, this, &LayoutsView::onFilterChanged);
  connect(dispatcher_, &QComboBox::currentIndexChanged, this, &LayoutsView::onFilterChanged);
  connect(mapping_, &QComboBox::currentIndexChanged, this, &LayoutsView::onFilterChanged);
  connect(save, &QPushButton::clicked, this, &LayoutsView::onSave);
  connect(overlap_, &QComboBox::currentTextChanged, this,
          [this](const QString& mode) { session_->setTwoBatchOverlap(mode.toStdString()); });
  connect(llMaxTokens_, &QSpinBox::valueChanged, this,
          [this](int tokens) { session_->setLlMaxTokens(tokens); });
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            // Only a row the user picks selects a layout; filtering never does.
            if (current.isValid() && !filtering_) {
              session_->selectLayout(current.data(PlanTableModel::kLayoutIndexRole).toInt());
            }
          });
  connect(session_, &Session::planFinished, this, &LayoutsView::onPlanFinished);
  connect(session_, &Session::costSourceChanged, this, &LayoutsView::showCostWarning);
  connect(session_, &Session::planStarted, this,
          [this] { header_->setText(tr("Planning… (the table shows the previous plan)")); });
  onPlanFinished();
}

void LayoutsView::showCostWarning() {
  const QString& w = session_->costWarning();
  costWarning_->setText(tr("Warning: %1").arg(w));
  costWarning_->setVisible(!w.isEmpty());
}

void LayoutsView::onFilterChanged() {
  filtering_ = true;
  filter_->setFeasibleOnly(feasible_->isChecked());
  const int d = dispatcher_->currentIndex();
  filter_->setDispatcher(
      d <= 0 ? std::nullopt : std::optional<planner::Dispatcher>(planner::kAllDispatchers[d - 1]));
  const int m = mapping_->currentIndex();
  filter_->setMapping(
      m <= 0 ? std::nullopt
             : std::optional<planner::RankMapping>(m == 1 ? planner::RankMapping::kTpInnermost
                                                          : planner::RankMapping::kEpInnermost));
  showSelectedRow();
  filtering_ = false;
}

void LayoutsView::showSelectedRow() {
  // The session's layout stays selected: its row when the filter shows it, else no row (the
  // other views keep showing it, and the note says so).
  const bool was = filtering_;
  filtering_ = true;
  int row = -1;
  for (int r = 0; r < filter_->rowCount(); ++r) {
    if (filter_->index(r, 0).data(PlanTableModel::kLayoutIndexRole).toInt() ==
        session_->selectedLayout()) {
      row = r;
      break;
    }
  }
  if (row >= 0) {
    const QModelIndex i = filter_->index(row, 0);
    table_->selectionModel()->setCurrentIndex(
        i, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    table_->scrollTo(i);
    hiddenNote_->hide();
  } else {
    table_->selectionModel()->clearSelection();
    table_->selectionModel()->setCurrentIndex(QModelIndex(), QItemSelectionModel::NoUpdate);
    const planner::LayoutCost* lc = session_->selectedLayoutCost();
    hiddenNote_->setText(
        lc == nullptr
            ? QString()
            : tr("The selected layout (%1 %2 %3) is hidden by the filter; the other "
                 "views still show it.")
                  .arg(QString::fromStdString(lc->layout.shape_name()),
                       QString::fromStdString(planner::dispatcher_name(lc->layout.dispatcher)),
                       QString::fromStdString(planner::mapping_name(lc->layout.mapping))));
    hiddenNote_->setVisible(lc != nullptr);
  }
  filtering_ = was;
}

void LayoutsView::onPlanFinished() {
  const auto plan = session_->plan();
  model_->setPlan(plan);
  pareto_->setPoints(session_->pareto());
  pareto_->setVisible(!session_->pareto().empty());
  error_->setText(session_->planError());
  error_->setVisible(!session_->planError().isEmpty());
  if (!plan) {
    header_->setText(tr("No plan."));
    recommendation_->setText(QString());
    return;
  }
  header_->setText(
      tr("<b>%1</b> on <b>%2</b>: %3 GPUs × %4, %5, %6 %7 per GPU, %8 MoE layers. Cost source: "
         "<b>%9</b>; expert load: %10; placement: %11. Times in ms per MoE layer; step = one "
         "forward of the whole model (attention, MoE or dense MLP, head): the time to first "
         "token in prefill, per output token in decode; %12")
          .arg(QString::fromStdString(plan->model), QString::fromStdString(plan->cluster))
          .arg(plan->num_gpus)
          .arg(QString::fromStdString(plan->device),
               QString::fromStdString(planner::phase_name(plan->workload.phase)))
          .arg(plan->workload.tokens_per_gpu)
          .arg(plan->workload.phase == planner::Phase::kPrefill ? tr("tokens") : tr("sequences"))
          .arg(plan->num_moe_layers)
          .arg(QString::fromStdString(plan->cost_source), QString::fromStdString(plan->load_source),
               QString::fromStdString(plan->placement_policy),
               plan->workload.counts_kv()
                   ? tr("memory includes the KV cache of a %1 + %2 token context and fits in "
                        "%3 of the HBM.")
                         .arg(plan->workload.isl)
                         .arg(plan->workload.osl)
                         .arg(plan->workload.mem_fraction, 0, 'f', 2)
                   : tr("memory excludes the KV cache.")));
  QString rec;
  if (plan->recommended >= 0) {
    const auto& c = plan->layouts[static_cast<std::size_t>(plan->recommended)];
    rec = tr("<b>Recommended:</b> %1 %2 %3<br>%4 per MoE layer, %5 per step (%10 attention per "
             "layer), %6 tokens/s/GPU, %7 of %8 per GPU (%9)")
              .arg(QString::fromStdString(c.layout.shape_name()),
                   QString::fromStdString(planner::dispatcher_name(c.layout.dispatcher)),
                   QString::fromStdString(planner::mapping_name(c.layout.mapping)),
                   formatMs(c.per_layer.total()), formatMs(c.step_seconds),
                   QString::number(c.tokens_per_s_per_gpu, 'f', 0), formatGiB(c.memory.total()),
                   formatGiB(c.memory_limit), QString::fromStdString(plan->cost_source))
              .arg(formatMs(c.dense.attention.seconds));
  } else {
    rec = tr("<b>No layout fits in memory.</b>");
  }
  rec += QStringLiteral("<ul style='margin-left:-20px'>");
  for (const auto& r : plan->reasons) {
    // Reasons may name inputs as "{gpus}": errorText renders them as the fields' labels.
    rec += QStringLiteral("<li>%1</li>").arg(errorText(Error{r}).toHtmlEscaped());
  }
  rec += QStringLiteral("</ul>");
  recommendation_->setText(rec);
  // Select the recommended row (the session selected it).
  showSelectedRow();
}

bool LayoutsView::savePlanJson(const QString& path) {
  const auto plan = session_->plan();
  if (!plan) {
    error_->setText(tr("No plan to save."));
    error_->show();
    return false;
  }
  QString file = path;
  if (QFileInfo(file).suffix().isEmpty()) file += QStringLiteral(".json");
  const Status s =
      write_file_atomic(file.toStdString(), planner::plan_to_json(*plan, 0, true).dump(2) + "\n");
  error_->setText(s.ok() ? QString() : errorText(s.error()));
  error_->setVisible(!s.ok());
  if (s.ok()) {
    emit saved(tr("Saved the plan (%1 layouts) to %2").arg(plan->layouts.size()).arg(file));
  }
  return s.ok();
}

void LayoutsView::onSave() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Save the plan JSON"), QString(), tr("JSON (*.json)"));
  if (!path.isEmpty()) savePlanJson(path);
}

}  // namespace moeplan::gui
