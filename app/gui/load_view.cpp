// The load balance and traffic views.
#include "app/gui/load_view.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cmath>
#include <limits>

#include "app/gui/charts.hpp"
#include "app/gui/session.hpp"
#include "planner/costs/cost_setup.hpp"
#include "planner/layout_figures.hpp"
#include "planner/placement/place_run.hpp"
#include "planner/placement/placement_file.hpp"

namespace moeplan::gui {

namespace {

QLabel* makeErrorLabel(QWidget* parent) {
  auto* l = new QLabel(parent);
  l->setStyleSheet(QStringLiteral("color: #b00020;"));
  l->setWordWrap(true);
  l->hide();
  return l;
}

QString tokens(double v) { return QString::number(v, 'f', v < 10.0 ? 2 : 0); }

/// Index of `policy` in the compared policies (they hold eplb and best).
std::size_t comparedIndex(planner::PlacementPolicy policy) {
  const auto& all = LoadView::comparedPolicies();
  return static_cast<std::size_t>(std::find(all.begin(), all.end(), policy) - all.begin());
}

}  // namespace

const std::vector<int>& LoadView::rebalanceGrid() {
  static const std::vector<int> kGrid = {1, 2, 4, 8};
  return kGrid;
}

const std::vector<planner::PlacementPolicy>& LoadView::comparedPolicies() {
  static const std::vector<planner::PlacementPolicy> kPolicies = {
      planner::PlacementPolicy::kContiguous, planner::PlacementPolicy::kEplb,
      planner::PlacementPolicy::kBest};
  return kPolicies;
}

LoadView::LoadView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout();
  row->addWidget(new QLabel(tr("La&yer:"), this));
  layer_ = new QSpinBox(this);
  layer_->setRange(0, 0);
  layer_->setToolTip(tr("MoE layer of the load (0-based)"));
  qobject_cast<QLabel*>(row->itemAt(0)->widget())->setBuddy(layer_);
  row->addWidget(layer_);
  auto* policyLabel = new QLabel(tr("Heat maps poli&cy:"), this);
  row->addWidget(policyLabel);
  policy_ = new QComboBox(this);
  for (auto p : comparedPolicies())
    policy_->addItem(QString::fromStdString(planner::policy_name(p)));
  policy_->setCurrentIndex(1);
  policyLabel->setBuddy(policy_);
  row->addWidget(policy_);
  sharedScale_ = new QCheckBox(tr("Same scal&e for all policies"), this);
  sharedScale_->setToolTip(
      tr("Colour the heat maps on one scale spanning contiguous, eplb and best, so switching "
         "the policy compares like with like"));
  row->addWidget(sharedScale_);
  timeObjective_ = new QCheckBox(tr("Search on pre&dicted time"), this);
  timeObjective_->setToolTip(
      tr("Add best-time: best's map refined on the cost model's predicted MoE time of the "
         "selected layout (weights read, rows computed, dispatch and combine on the cluster's "
         "links), as moeplan place --objective time; and show every placement's predicted time "
         "per step on steps none of them saw. Takes seconds to a minute on large models."));
  row->addWidget(timeObjective_);
  row->addStretch(1);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 0);
  progress_->setMaximumWidth(140);
  progress_->hide();
  row->addWidget(progress_);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setToolTip(tr("Abandon the running placement; the figures shown stay"));
  cancel_->hide();
  row->addWidget(cancel_);
  auto* save = new QPushButton(tr("Save pl&acement…"), this);
  save->setToolTip(
      tr("The heat maps' placement as a moeplan placement file (as `moeplan place "
         "--out` writes)"));
  row->addWidget(save);
  layout->addLayout(row);
  header_ = new QLabel(this);
  header_->setWordWrap(true);
  layout->addWidget(header_);
  error_ = makeErrorLabel(this);
  layout->addWidget(error_);
  timeText_ = new QLabel(this);
  timeText_->setWordWrap(true);
  timeText_->hide();
  layout->addWidget(timeText_);
  poll_ = new QTimer(this);
  poll_->setInterval(100);
  connect(poll_, &QTimer::timeout, this, &LoadView::showProgress);

  auto* grid = new QGridLayout();
  bars_ = new GroupedBarChart(this);
  balance_ = new LineChart(this);
  expertMap_ = new HeatMap(this);
  layerMap_ = new HeatMap(this);
  expertMap_->setFormatter(tokens);
  layerMap_->setFormatter(tokens);
  layerMap_->setScaleFromMin(true);
  grid->addWidget(bars_, 0, 0);
  grid->addWidget(balance_, 0, 1);
  grid->addWidget(expertMap_, 1, 0);
  grid->addWidget(layerMap_, 1, 1);
  grid->setRowStretch(0, 1);
  grid->setRowStretch(1, 1);
  timeline_ = new LineChart(this);
  timeline_->setToolTip(
      tr("A load with steps over time: eplb fitted once on the steps before the scored ones, "
         "against eplb re-fitted every N steps on the last W steps; a re-fit's expert copies "
         "are waited for before its step"));
  layout->addLayout(grid, 3);
  // Below the grid, in the outer layout: hidden (a load without steps) it takes no room.
  layout->addWidget(timeline_, 1);
  rebalanceText_ = new QLabel(this);
  rebalanceText_->setWordWrap(true);
  layout->addWidget(rebalanceText_);
  timeline_->hide();
  rebalanceText_->hide();

  connect(&watcher_, &QFutureWatcher<BalanceOutcome>::finished, this, &LoadView::onDone);
  connect(layer_, &QSpinBox::valueChanged, this, &LoadView::redraw);
  connect(policy_, &QComboBox::currentIndexChanged, this, &LoadView::redraw);
  connect(sharedScale_, &QCheckBox::toggled, this, &LoadView::redraw);
  connect(timeObjective_, &QCheckBox::toggled, this, &LoadView::recompute);
  connect(save, &QPushButton::clicked, this, &LoadView::onSave);
  connect(cancel_, &QPushButton::clicked, this, &LoadView::cancel);
  connect(session_, &Session::layoutSelected, this, &LoadView::recompute);
  connect(session_, &Session::planFinished, this, &LoadView::recompute);
}

LoadView::~LoadView() {
  // A running search on predicted time stops; the worker holds copies of what it reads.
  if (search_) search_->cancel = true;
}

void LoadView::recompute() {
  const planner::LayoutCost* lc = session_->selectedLayoutCost();
  const auto& load = session_->load();
  const int generation = ++generation_;
  if (search_) search_->cancel = true;  // the abandoned computation's search stops
  search_.reset();
  if (lc == nullptr || !load) {
    outcome_ = BalanceOutcome{};
    outcome_.error = !load ? tr("No expert load: the load in the Model view did not load.")
                           : tr("No layout selected: plan first (Layouts view).");
    redraw();
    return;
  }
  const int ep = lc->layout.ep_size;
  header_->setText(tr("Placing experts for ep%1…").arg(ep));
  // What the cost model needs (rebalancing, the time objective), copied for the worker.
  std::optional<models::MoeModel> model = session_->model();
  std::optional<planner::Cluster> cluster = session_->cluster();
  const bool timeObjective = timeObjective_->isChecked();
  auto state = std::make_shared<SearchState>();
  search_ = state;
  auto future = QtConcurrent::run([load = load->load, steps = load->steps,
                                   fit = session_->policyFit(), ep, generation, timeObjective,
                                   state, model = std::move(model), cluster = std::move(cluster),
                                   costDb = session_->costDb().toStdString(),
                                   workload = session_->workload(), layout = lc->layout]() {
    BalanceOutcome out;
    out.generation = generation;
    out.epSize = ep;
    // A placement's figures and per-layer GPU loads, kept beside it.
    auto add = [&out, &load, ep](const QString& name, planner::PlacementPolicy policy,
                                 planner::PlacementResult placed) -> Status {
      auto fig = planner::balance_figures(load, placed.placement);
      if (!fig) return fig.error();
      std::vector<std::vector<double>> loads;
      for (int l = 0; l < load.num_layers(); ++l) {
        const auto& map = placed.placement.physical_to_logical[static_cast<std::size_t>(
            placed.placement.num_layers() == 1 ? 0 : l)];
        loads.push_back(planner::gpu_loads(load.counts[static_cast<std::size_t>(l)], map, ep));
      }
      out.policies.push_back(policy);
      out.names << name;
      out.placements.push_back(std::move(placed));
      out.figures.push_back(std::move(*fig));
      out.gpuLoads.push_back(std::move(loads));
      return Status::Ok();
    };
    for (auto policy : comparedPolicies()) {
      planner::PolicyFit f = fit;
      f.policy = policy;
      out.numNodes = planner::policy_config(f, load.num_experts, ep).num_nodes;
      auto placed = planner::place_for_ep(load, f, ep);
      if (!placed) {
        out.error = errorText(placed.error());
        return out;
      }
      const Status added =
          add(QString::fromStdString(planner::policy_name(policy)), policy, std::move(*placed));
      if (!added.ok()) {
        out.error = errorText(added.error());
        return out;
      }
    }
    const bool rebalance = steps.size() >= 2;
    if (!model || !cluster || (!rebalance && !timeObjective)) return out;
    auto setup = planner::make_cost_setup(*cluster, costDb);
    if (!setup) {
      if (rebalance) out.rebalanceError = errorText(setup.error());
      if (timeObjective) out.timeError = errorText(setup.error());
      return out;
    }
    const planner::ExpertLoad none;
    const planner::CostContext ctx{*model, *cluster, setup->costs(), workload, none, nullptr};
    if (timeObjective) {
      // Steps of the layout's tokens: searched and checked on as `moeplan place --objective
      // time` draws them, timed on others.
      const auto pairs = static_cast<std::int64_t>(planner::step_pairs(ctx, layout));
      const planner::RefineSteps drawn = planner::draw_refine_steps(load, pairs, fit.seed);
      planner::TimeSearchOptions options;
      options.progress = [state](int settled, int layers, int, double) {
        state->layers = layers;
        state->settled = settled;
      };
      options.cancelled = [state] { return state->cancel.load(); };
      auto searched = planner::search_placement_by_time(
          ctx, layout, out.placements[comparedIndex(planner::PlacementPolicy::kEplb)].placement,
          out.placements[comparedIndex(planner::PlacementPolicy::kBest)].placement, drawn.search,
          drawn.check, load.source, options);
      if (!searched) {
        out.timeError = errorText(searched.error());
      } else {
        planner::PlacementResult placed;
        placed.placement = std::move(searched->placement);
        placed.seconds = searched->report.seconds;
        planner::fill_logical_maps(placed);
        out.timeSearch = searched->report;
        const Status added = add(QString::fromLatin1(planner::kTimeSearchPolicy),
                                 planner::PlacementPolicy::kBest, std::move(placed));
        if (!added.ok()) out.timeError = errorText(added.error());
      }
      if (out.timeError.isEmpty()) {
        const auto unseen = planner::draw_eval_steps(load, kTimedSteps, pairs, fit.seed);
        for (const auto& placed : out.placements) {
          auto mean = planner::mean_moe_seconds(ctx, layout, placed.placement, unseen, load.source);
          if (!mean) {
            out.timeError = errorText(mean.error());
            out.predictedSeconds.clear();
            break;
          }
          out.predictedSeconds.push_back(*mean);
        }
        out.timedSteps = kTimedSteps;
        out.timeCosts = QString::fromStdString(setup->costs().name());
        out.timedOn = tr("%1 %2, %3 %4 tokens per GPU")
                          .arg(QString::fromStdString(layout.shape_name()),
                               QString::fromStdString(planner::dispatcher_name(layout.dispatcher)),
                               QString::fromStdString(planner::phase_name(workload.phase)))
                          .arg(workload.tokens_per_gpu);
      }
    }
    if (rebalance) {
      planner::PolicyFit f = fit;
      f.policy = planner::PlacementPolicy::kEplb;
      planner::RebalanceRequest req;
      req.policy = f.policy;
      req.config = planner::policy_config(f, load.num_experts, ep);
      req.every = rebalanceGrid();
      req.windows.clear();
      for (const int w : rebalanceGrid()) {
        if (w < static_cast<int>(steps.size())) req.windows.push_back(w);
      }
      out.rebalanceCosts = QString::fromStdString(setup->costs().name());
      auto r = planner::simulate_rebalancing(steps, load.source, ctx, layout, req);
      if (r) {
        out.rebalance = std::move(*r);
      } else {
        out.rebalanceError = errorText(r.error());
      }
    }
    return out;
  });
  watcher_.setFuture(future);
  running_ = true;
  progress_->setRange(0, 0);
  progress_->setTextVisible(false);
  progress_->show();
  cancel_->show();
  poll_->start();
}

void LoadView::showProgress() {
  if (!search_ || search_->layers.load() == 0) return;
  // The search on predicted time reports layers settled per round.
  progress_->setRange(0, search_->layers.load());
  progress_->setValue(search_->settled.load());
  progress_->setFormat(tr("time search: %v/%m layers"));
  progress_->setTextVisible(true);
}

void LoadView::cancel() {
  if (!running_) return;
  ++generation_;
  if (search_) search_->cancel = true;
  search_.reset();
  poll_->stop();
  progress_->hide();
  cancel_->hide();
  header_->setText(tr("Placement cancelled; the figures shown are the previous ones."));
}

void LoadView::waitForIdle() {
  while (running_) {
    watcher_.waitForFinished();
    QCoreApplication::processEvents();
  }
}

void LoadView::onDone() {
  running_ = false;
  poll_->stop();
  progress_->hide();
  cancel_->hide();
  BalanceOutcome out = watcher_.result();
  if (out.generation != generation_) return;
  search_.reset();
  outcome_ = std::move(out);
  if (!outcome_.names.isEmpty()) {
    // The heat maps' policies: the compared ones, and best-time when it was searched.
    QStringList items;
    for (int i = 0; i < policy_->count(); ++i) items << policy_->itemText(i);
    if (items != outcome_.names) {
      const QSignalBlocker block(policy_);
      const QString current = policy_->currentText();
      policy_->clear();
      policy_->addItems(outcome_.names);
      policy_->setCurrentIndex(std::max(0, static_cast<int>(outcome_.names.indexOf(current))));
    }
  }
  const int layers = outcome_.gpuLoads.empty() ? 1 : static_cast<int>(outcome_.gpuLoads[0].size());
  layer_->setRange(0, std::max(0, layers - 1));
  redraw();
}

void LoadView::redraw() {
  error_->setText(outcome_.error);
  error_->setVisible(!outcome_.error.isEmpty());
  drawTime();
  if (!outcome_.error.isEmpty() || outcome_.placements.empty()) {
    bars_->setData(tr("Tokens per GPU"), {}, {}, {}, {}, {});
    balance_->setData(tr("Balancedness per layer"), {}, {}, {}, {}, 0, 1);
    expertMap_->setData(tr("Expert × GPU"), {}, {}, {}, {});
    layerMap_->setData(tr("Layer × GPU"), {}, {}, {}, {});
    timeline_->hide();
    rebalanceText_->hide();
    return;
  }
  drawRebalance();
  const auto& load = session_->load();
  const planner::LayoutCost* lc = session_->selectedLayoutCost();
  const int layer = layer_->value();
  const auto np = outcome_.policies.size();
  QStringList names, gpus;
  std::vector<std::vector<double>> perGpu;
  std::vector<std::vector<double>> balance;
  for (std::size_t p = 0; p < np; ++p) {
    names << QStringLiteral("%1 (%2)").arg(
        outcome_.names[static_cast<int>(p)],
        QString::number(
            outcome_.figures[p].layer_balancedness.empty()
                ? outcome_.figures[p].balancedness
                : outcome_.figures[p].layer_balancedness[static_cast<std::size_t>(std::min<int>(
                      layer, static_cast<int>(outcome_.figures[p].layer_balancedness.size()) - 1))],
            'f', 3));
    perGpu.push_back(outcome_.gpuLoads[p][static_cast<std::size_t>(layer)]);
    balance.push_back(outcome_.figures[p].layer_balancedness);
  }
  for (int g = 0; g < outcome_.epSize; ++g) gpus << QString::number(g);
  bars_->setData(
      tr("Routed tokens per EP rank, layer %1 (legend: balancedness mean/max)").arg(layer), gpus,
      names, perGpu, tr("EP rank"), tr("routed tokens"));
  QStringList lineNames;
  double lo = 1.0;
  for (std::size_t p = 0; p < np; ++p) {
    lineNames << QStringLiteral("%1: mean %2")
                     .arg(outcome_.names[static_cast<int>(p)],
                          QString::number(outcome_.figures[p].balancedness, 'f', 3));
    for (double b : balance[p]) lo = std::min(lo, b);
  }
  balance_->setData(tr("Balancedness per layer (mean / max GPU load; 1 = perfect)"), lineNames,
                    balance, tr("MoE layer"), tr("balancedness"), std::max(0.0, lo - 0.05), 1.0);
  const auto hp =
      static_cast<std::size_t>(std::clamp(policy_->currentIndex(), 0, static_cast<int>(np) - 1));
  auto expertLoads = [&](std::size_t policy) {
    const auto& placement = outcome_.placements[policy].placement;
    const auto& map =
        placement
            .physical_to_logical[static_cast<std::size_t>(placement.num_layers() == 1 ? 0 : layer)];
    return planner::expert_gpu_loads(load->load.counts[static_cast<std::size_t>(layer)], map,
                                     outcome_.epSize);
  };
  if (sharedScale_->isChecked()) {
    // One range over every policy: the expert map from 0, the layer map from its smallest
    // non-zero value (each map's own rule), both up to the largest value of any policy.
    double expertHi = 0.0, layerLo = std::numeric_limits<double>::infinity(), layerHi = 0.0;
    for (std::size_t p = 0; p < np; ++p) {
      for (const auto& row : expertLoads(p)) {
        for (double v : row) expertHi = std::max(expertHi, v);
      }
      for (const auto& row : outcome_.gpuLoads[p]) {
        for (double v : row) {
          layerHi = std::max(layerHi, v);
          if (v > 0.0) layerLo = std::min(layerLo, v);
        }
      }
    }
    expertMap_->setRange(0.0, expertHi);
    layerMap_->setRange(std::isfinite(layerLo) ? layerLo : 0.0, layerHi);
  } else {
    expertMap_->setRange(1.0, 0.0);
    layerMap_->setRange(1.0, 0.0);
  }
  const QString scale =
      sharedScale_->isChecked() ? tr(" (scale shared by the policies)") : QString();
  expertMap_->setData(tr("Expert × EP rank, layer %1, %2: routed tokens%3")
                          .arg(layer)
                          .arg(outcome_.names[static_cast<int>(hp)])
                          .arg(scale),
                      expertLoads(hp), tr("expert"), tr("EP rank"), tr("tokens"));
  layerMap_->setData(tr("Layer × EP rank, %1: routed tokens%2")
                         .arg(outcome_.names[static_cast<int>(hp)])
                         .arg(scale),
                     outcome_.gpuLoads[hp], tr("MoE layer"), tr("EP rank"), tr("tokens"));
  const int perNode = outcome_.numNodes > 1 ? outcome_.epSize / outcome_.numNodes : 0;
  expertMap_->setBlocks(0, perNode);
  layerMap_->setBlocks(0, perNode);
  header_->setText(
      tr("Load <b>%1</b> (%2 layers × %3 experts) placed on the %4 EP ranks of %5 (%6 node%7, "
         "redundant slots for eplb and best: %8). Token counts are routed (token, "
         "expert) pairs of the load. Best's search took %9 s.")
          .arg(QString::fromStdString(load->load.source))
          .arg(load->load.num_layers())
          .arg(load->load.num_experts)
          .arg(outcome_.epSize)
          .arg(lc != nullptr ? QString::fromStdString(lc->layout.shape_name()) : QString())
          .arg(outcome_.numNodes)
          .arg(outcome_.numNodes == 1 ? QString() : QStringLiteral("s"))
          .arg(QString::fromStdString(session_->policyFit().redundancy.describe()))
          .arg(QString::number(
              outcome_.placements[comparedIndex(planner::PlacementPolicy::kBest)].seconds, 'f',
              2)));
}

void LoadView::drawTime() {
  if (!outcome_.error.isEmpty() ||
      (outcome_.predictedSeconds.empty() && outcome_.timeError.isEmpty())) {
    timeText_->hide();
    return;
  }
  if (!outcome_.timeError.isEmpty()) {
    timeText_->setText(tr("Search on predicted time: %1").arg(outcome_.timeError));
    timeText_->show();
    return;
  }
  QStringList times;
  for (std::size_t p = 0; p < outcome_.predictedSeconds.size(); ++p) {
    times << tr("%1 <b>%2 ms</b>")
                 .arg(outcome_.names[static_cast<int>(p)])
                 .arg(1e3 * outcome_.predictedSeconds[p], 0, 'f', 3);
  }
  QString search;
  if (outcome_.timeSearch) {
    const planner::TimeSearchReport& r = *outcome_.timeSearch;
    const double eplb = outcome_.predictedSeconds[comparedIndex(planner::PlacementPolicy::kEplb)];
    const double found = outcome_.predictedSeconds.back();
    search = tr(" best-time against eplb: %1 %. The search: %2 rounds, %3 of %4 moves kept; "
                "layers refined / best's / eplb's: %5 / %6 / %7; %8 s.")
                 .arg(eplb > 0.0 ? 100.0 * (found / eplb - 1.0) : 0.0, 0, 'f', 2)
                 .arg(r.rounds)
                 .arg(r.moves_kept)
                 .arg(r.moves_tried)
                 .arg(r.layers_refined)
                 .arg(r.layers_best)
                 .arg(r.layers - r.layers_refined - r.layers_best)
                 .arg(r.seconds, 0, 'f', 2);
  }
  timeText_->setText(tr("Predicted MoE time per step (all MoE layers; cost model: %1) on %2, over "
                        "%3 steps none of the placements saw: %4.%5")
                         .arg(outcome_.timeCosts, outcome_.timedOn)
                         .arg(outcome_.timedSteps)
                         .arg(times.join(QStringLiteral(" · ")), search));
  timeText_->show();
}

void LoadView::drawRebalance() {
  if (!outcome_.rebalance) {
    timeline_->hide();
    rebalanceText_->setText(outcome_.rebalanceError.isEmpty()
                                ? QString()
                                : tr("Rebalancing over time: %1").arg(outcome_.rebalanceError));
    rebalanceText_->setVisible(!outcome_.rebalanceError.isEmpty());
    return;
  }
  const planner::RebalanceResult& r = *outcome_.rebalance;
  const auto& fixed = r.schemes.front();
  // The re-fit shown: the recommended one, or, when fixed wins, the best scheme that does
  // rebalance within the scored steps (else the first re-fit).
  std::size_t shown = static_cast<std::size_t>(r.recommended);
  if (shown == 0) {
    shown = 1;
    for (std::size_t i = 1; i < r.schemes.size(); ++i) {
      const auto& s = r.schemes[i];
      const auto& cur = r.schemes[shown];
      if ((s.rebalances > 0 && cur.rebalances == 0) ||
          ((s.rebalances > 0) == (cur.rebalances > 0) &&
           s.net_seconds_per_step < cur.net_seconds_per_step)) {
        shown = i;
      }
    }
  }
  const auto& refit = r.schemes[shown];
  std::vector<double> a, b;
  double hi = 0.0, lo = std::numeric_limits<double>::infinity();
  for (std::size_t t = 0; t < fixed.series_step_seconds.size(); ++t) {
    a.push_back(1e3 * fixed.series_step_seconds[t]);
    b.push_back(1e3 * (refit.series_step_seconds[t] + refit.series_move_seconds[t]));
    hi = std::max({hi, a.back(), b.back()});
    lo = std::min({lo, a.back(), b.back()});
  }
  auto name = [](const planner::RebalanceScheme& s) {
    return s.every == 0 ? tr("fixed (fit on %1 steps)").arg(s.window)
                        : tr("every %1, window %2").arg(s.every).arg(s.window);
  };
  timeline_->setData(
      tr("Rebalancing over time (%1 re-fits): MoE time per step (cost model, %2), a re-fit's "
         "copy wait added to its step")
          .arg(QString::fromStdString(outcome_.rebalance->policy))
          .arg(outcome_.rebalanceCosts),
      {tr("%1: net %2 ms/step").arg(name(fixed)).arg(1e3 * fixed.net_seconds_per_step, 0, 'f', 3),
       tr("%1: net %2 ms/step, rebalances: %3, %4 GiB copied")
           .arg(name(refit))
           .arg(1e3 * refit.net_seconds_per_step, 0, 'f', 3)
           .arg(refit.rebalances)
           .arg(refit.bytes_moved / (1ULL << 30), 0, 'f', 2)},
      {a, b}, tr("step of the load"), tr("ms per step"),
      std::max(0.0, lo - 0.05 * (hi - lo) - 1e-3), hi + 0.05 * (hi - lo) + 1e-3, r.first_scored);
  timeline_->show();
  const auto& best = r.schemes[static_cast<std::size_t>(r.recommended)];
  rebalanceText_->setText(
      tr("Rebalancing over time (%1 steps, scored from step %2; %3 re-fit schemes tried, N and W "
         "in {1, 2, 4, 8}): recommended <b>%4</b>, net %5 ms per step%6. The same figures: "
         "<tt>moeplan rebalance</tt>.")
          .arg(r.num_steps)
          .arg(r.first_scored)
          .arg(r.schemes.size() - 1)
          .arg(name(best))
          .arg(1e3 * best.net_seconds_per_step, 0, 'f', 3)
          .arg(r.recommended == 0 ? tr(" (no re-fit saves more than its copies cost)")
                                  : tr(", %1 % below fixed")
                                        .arg(100.0 * (1.0 - best.net_seconds_per_step /
                                                                fixed.net_seconds_per_step),
                                             0, 'f', 1)));
  rebalanceText_->show();
}

bool LoadView::savePlacement(const QString& path) {
  const int index = policy_->currentIndex();
  if (!session_->load() || index < 0 || index >= static_cast<int>(outcome_.placements.size())) {
    error_->setText(tr("No placement to save."));
    error_->show();
    return false;
  }
  const auto hp = static_cast<std::size_t>(index);
  planner::PolicyFit fit = session_->policyFit();
  fit.policy = outcome_.policies[hp];
  const auto& load = *session_->load();
  planner::PlacementFile file{outcome_.placements[hp],
                              planner::policy_config(fit, load.load.num_experts, outcome_.epSize),
                              load.layer_ids, load.load.source};
  const Status s = planner::write_placement_file(path.toStdString(), file);
  error_->setText(s.ok() ? QString() : errorText(s.error()));
  error_->setVisible(!s.ok());
  return s.ok();
}

void LoadView::onSave() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Save the placement"), QString(), tr("JSON (*.json)"));
  if (!path.isEmpty()) savePlacement(path);
}

TrafficView::TrafficView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout();
  auto* label = new QLabel(tr("La&yer:"), this);
  row->addWidget(label);
  layer_ = new QSpinBox(this);
  label->setBuddy(layer_);
  row->addWidget(layer_);
  row->addStretch(1);
  layout->addLayout(row);
  header_ = new QLabel(this);
  header_->setWordWrap(true);
  layout->addWidget(header_);
  error_ = makeErrorLabel(this);
  layout->addWidget(error_);
  map_ = new HeatMap(this);
  map_->setFormatter(formatBytes);
  map_->setScaleFromMin(true);
  layout->addWidget(map_, 1);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
  connect(layer_, &QSpinBox::valueChanged, this, &TrafficView::recompute);
  connect(session_, &Session::layoutSelected, this, &TrafficView::recompute);
}

void TrafficView::recompute() {
  const planner::LayoutCost* lc = session_->selectedLayoutCost();
  const auto& model = session_->model();
  const auto& cluster = session_->cluster();
  const auto& load = session_->load();
  auto fail = [this](const QString& text) {
    error_->setText(text);
    error_->setVisible(!text.isEmpty());
    map_->setData(tr("GPU × GPU bytes"), {}, {}, {}, {});
    summary_->clear();
  };
  if (lc == nullptr || !model || !cluster || !load) {
    fail(tr("No layout selected: plan first (Layouts view)."));
    return;
  }
  const int layers =
      load->load.num_layers() > 1 ? load->load.num_layers() : model->num_moe_layers();
  {
    const QSignalBlocker block(layer_);
    layer_->setRange(0, std::max(0, layers - 1));
  }
  // The plan's own cost source (as the session sets it up); the traffic's bytes do not depend on
  // it, its collectives' layout does not either.
  auto setup = planner::make_cost_setup(*cluster, session_->costDb().toStdString());
  if (!setup) {
    fail(errorText(setup.error()));
    return;
  }
  const planner::CostContext ctx{
      *model, *cluster, setup->costs(), session_->workload(), load->load, session_->placementFn()};
  auto m = planner::layer_traffic(ctx, lc->layout, layer_->value());
  if (!m) {
    fail(errorText(m.error()));
    return;
  }
  error_->hide();
  const int gpn = cluster->info().gpus_per_node;
  const planner::TrafficTotals totals = planner::traffic_totals(*m, gpn);
  const double intra = totals.intra_node;
  const double inter = totals.inter_node;
  map_->setData(tr("Bytes GPU i sends GPU j in one MoE layer (dispatch + combine), layer %1, %2 "
                   "%3 %4")
                    .arg(layer_->value())
                    .arg(QString::fromStdString(lc->layout.shape_name()),
                         QString::fromStdString(planner::dispatcher_name(lc->layout.dispatcher)),
                         QString::fromStdString(planner::mapping_name(lc->layout.mapping))),
                *m, tr("sending GPU"), tr("receiving GPU"), tr("bytes"));
  map_->setBlocks(gpn, gpn);
  header_->setText(
      tr("Red lines mark node boundaries (%1 GPUs per node): blocks on the diagonal stay inside "
         "a node (NVLink), the rest cross the network. Flows as the roofline cost model prices "
         "them (all-to-all(-v) and all-gather(-v) of dispatch and combine; TP all-reduces left "
         "out); %2 tokens per GPU, %3. Colours span the smallest to the largest non-zero "
         "entry (one colour when all are equal); grey is no traffic. Hover a cell for its "
         "bytes.")
          .arg(gpn)
          .arg(session_->workload().tokens_per_gpu)
          .arg(QString::fromStdString(planner::phase_name(session_->workload().phase))));
  const double total = intra + inter;
  summary_->setText(tr("Total %1 per MoE layer: %2 inside nodes (%3 %), %4 across nodes (%5 %).")
                        .arg(formatBytes(total), formatBytes(intra))
                        .arg(total > 0 ? 100.0 * intra / total : 0.0, 0, 'f', 1)
                        .arg(formatBytes(inter))
                        .arg(total > 0 ? 100.0 * inter / total : 0.0, 0, 'f', 1));
}

}  // namespace moeplan::gui
