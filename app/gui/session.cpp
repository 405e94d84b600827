// The shared inputs and the plan worker.
#include "app/gui/session.hpp"

#include <QCoreApplication>
#include <QFileInfo>
#include <QtConcurrent/QtConcurrentRun>
#include <map>

#include "models/json_reader.hpp"
#include "models/registry.hpp"
#include "models/units.hpp"
#include "planner/costs/cost_setup.hpp"
#include "profiler/routed_load.hpp"

namespace moeplan::gui {

QString errorText(const Error& error, const std::map<std::string, std::string>& labels) {
  // The libraries' input names and the labels of the fields that hold them.
  static const std::map<std::string, std::string> kLabels = {
      {"backend", "Backend"},
      {"batches", "Decode batches"},
      {"cluster", "Cluster"},
      {"cold_mib", "Cold rotation"},
      {"contexts", "Contexts"},
      {"costs", "Cost DB"},
      {"dispatcher", "Dispatchers"},
      {"dtype", "Dtype"},
      {"format", "Format"},
      {"framework_version", "Framework version"},
      // No GPU-count field: the count is the Topology view's nodes × GPUs per node.
      {"gpus", "Nodes × GPUs per node"},
      {"layout", "Layout"},
      {"layouts", "Layouts"},
      {"ll_max_tokens", "DeepEP-LL buffer"},
      {"isl", "Context (input tokens)"},
      {"load", "Expert load"},
      {"max_bytes", "Max bytes"},
      {"max_seconds", "Max seconds"},
      {"max_tokens", "Max tokens"},
      {"mem_fraction", "Context (memory fraction)"},
      {"model", "Model"},
      {"ops", "Ops"},
      {"osl", "Context (output tokens)"},
      {"out", "Output"},
      {"phase", "Phase"},
      {"placement", "Placement"},
      {"rate", "Offered rate"},
      {"redundant", "Redundant slots"},
      {"resume", "Resume"},
      {"ranks", "Ranks"},
      {"scale", "Scale"},
      {"scope", "Part"},
      {"statistic", "Statistic"},
      {"tokens", "Tokens"},
      // One field holds the phase's target: TTFT in prefill, TPOT in decode.
      {"tpot_ms", "Latency target"},
      {"ttft_ms", "Latency target"},
      {"tp", "Part"},
      {"weights", "Weight dtype"}};
  return QString::fromStdString(render_error(error, [&labels](const std::string& input) {
    if (const auto own = labels.find(input); own != labels.end()) return own->second;
    const auto it = kLabels.find(input);
    return it != kLabels.end() ? it->second : input;
  }));
}

// The numbers the CLI prints, formatted by the same functions (models/units).
QString formatMs(double seconds) { return QString::fromStdString(format_ms(seconds)); }
QString formatGiB(double bytes) { return QString::fromStdString(format_gib(bytes)); }
QString formatBytes(double bytes) { return QString::fromStdString(format_bytes(bytes)); }

Result<std::optional<planner::PlacementFile>> policyPlacementFile(const PlanInputs& inputs,
                                                                  int ep_size) {
  if (!inputs.placement || !inputs.model) return std::optional<planner::PlacementFile>();
  auto placement = inputs.placement(ep_size);
  if (!placement) return placement.error();
  planner::PlacementFile file;
  file.result.placement = std::move(*placement);
  planner::fill_logical_maps(file.result);
  file.config = planner::policy_config(inputs.fit, inputs.model->num_experts, ep_size);
  file.layer_ids = inputs.layerIds;
  file.load_source = inputs.loadSource;
  return std::optional<planner::PlacementFile>(std::move(file));
}

Session::Session(QObject* parent) : QObject(parent) {
  debounce_.setSingleShot(true);
  debounce_.setInterval(250);
  connect(&debounce_, &QTimer::timeout, this, &Session::replan);
  connect(&watcher_, &QFutureWatcher<PlanOutcome>::finished, this, &Session::onPlanDone);
  connect(&servingWatcher_, &QFutureWatcher<ServingOutcome>::finished, this,
          &Session::onServingDone);
}

Session::~Session() {
  watcher_.waitForFinished();
  servingWatcher_.waitForFinished();
}

planner::PolicyFit Session::policyFit() const {
  const auto policy = planner::is_placement_file(choices_.placement)
                          ? planner::PlacementPolicy::kContiguous
                          : planner::parse_policy(choices_.placement).value();
  if (!model_ || !cluster_) {
    planner::PolicyFit f;
    f.policy = policy;
    f.redundancy = choices_.redundancy;
    return f;
  }
  return planner::policy_fit(*model_, *cluster_, policy, choices_.redundancy,
                             workload_.tokens_per_gpu);
}

const planner::LayoutCost* Session::selectedLayoutCost() const {
  if (!plan_ || selected_ < 0 || selected_ >= static_cast<int>(plan_->layouts.size())) {
    return nullptr;
  }
  return &plan_->layouts[static_cast<std::size_t>(selected_)];
}

QString Session::setModel(const QString& nameOrPath) {
  auto m = models::load_model(nameOrPath.toStdString());
  if (!m) return errorText(m.error());
  loadedModel_ = *m;
  if (auto st = models::apply_weights_choice(*m, weights_.toStdString()); !st) {
    return errorText(st.error());
  }
  model_ = std::move(*m);
  emit modelChanged();
  // The load follows the model (layer and expert counts); a file that does not fit says so.
  const QString loadError = setLoad(loadSpec_);
  if (!loadError.isEmpty()) {
    load_.reset();
    emit loadChanged();
  }
  scheduleReplan();
  return {};
}

QString Session::setWeights(const QString& name) {
  if (loadedModel_) {
    models::MoeModel m = *loadedModel_;
    if (auto st = models::apply_weights_choice(m, name.toStdString()); !st) {
      return errorText(st.error());
    }
    model_ = std::move(m);
  } else if (auto f = parse_weight_format(name.toStdString(), DType::kBf16);
             !name.isEmpty() && !f) {
    return errorText(f.error());
  }
  weights_ = name;
  emit modelChanged();
  scheduleReplan();
  return {};
}

QString Session::setClusterName(const QString& nameOrPath) {
  auto c = planner::load_cluster(nameOrPath.toStdString());
  if (!c) return errorText(c.error());
  auto j = load_json_file(c->info().source);
  if (!j) return errorText(j.error());
  clusterJson_ = *j;
  cluster_ = std::move(*c);
  updateCostWarning();
  emit clusterChanged();
  scheduleReplan();
  return {};
}

QString Session::setClusterJson(const nlohmann::json& j, const QString& source) {
  auto c = planner::parse_cluster(j, source.toStdString());
  if (!c) return errorText(c.error());
  clusterJson_ = j;
  cluster_ = std::move(*c);
  updateCostWarning();
  emit clusterChanged();
  scheduleReplan();
  return {};
}

QString Session::setLoad(const QString& fileOrSpec) {
  const models::MoeModel* mp = model_ ? &*model_ : nullptr;
  auto data = profiler::load_any(fileOrSpec.toStdString(), mp);
  if (!data) return errorText(data.error());
  loadSpec_ = fileOrSpec;
  load_ = std::move(*data);
  emit loadChanged();
  scheduleReplan();
  return {};
}

void Session::setWorkload(const planner::Workload& w, double target_ms) {
  workload_ = w;
  choices_.phase = planner::phase_name(w.phase);
  // The latency target of the phase, as moeplan plan --ttft-ms (prefill) or --tpot-ms (decode).
  const bool target = target_ms > 0.0;
  const bool decode = w.phase == planner::Phase::kDecode;
  choices_.ttft_ms = target && !decode ? std::optional<double>(target_ms) : std::nullopt;
  choices_.tpot_ms = target && decode ? std::optional<double>(target_ms) : std::nullopt;
  choices_.tokens_per_gpu = w.tokens_per_gpu;
  // As moeplan plan: output tokens and the memory fraction only with input tokens.
  const bool context = w.isl > 0;
  choices_.isl = context ? std::optional<int>(w.isl) : std::nullopt;
  choices_.osl = context ? std::optional<int>(w.osl) : std::nullopt;
  choices_.mem_fraction = context ? std::optional<double>(w.mem_fraction) : std::nullopt;
  scheduleReplan();
}

void Session::setPolicy(planner::PlacementPolicy policy, planner::Redundancy redundancy) {
  choices_.placement = planner::policy_name(policy);
  choices_.redundancy = redundancy;
  scheduleReplan();
}

void Session::setTwoBatchOverlap(const std::string& mode) {
  choices_.tbo = mode;
  scheduleReplan();
}

void Session::setLlMaxTokens(int tokens) {
  choices_.ll_max_tokens = tokens;
  scheduleReplan();
}

QString Session::setCostDb(const QString& path) {
  if (!path.isEmpty()) {
    if (!cluster_) return tr("No cluster: choose one in the Topology view.");
    auto setup = planner::make_cost_setup(*cluster_, path.toStdString());
    if (!setup) return errorText(setup.error());
  }
  costDb_ = path;
  updateCostWarning();
  emit costSourceChanged();
  scheduleReplan();
  return {};
}

void Session::updateCostWarning() {
  const QString before = costWarning_;
  costWarning_.clear();
  if (!costDb_.isEmpty() && cluster_) {
    auto setup = planner::make_cost_setup(*cluster_, costDb_.toStdString());
    if (!setup) {
      costWarning_ = errorText(setup.error());
    } else if (setup->measured && setup->measured->device() != cluster_->device().name) {
      costWarning_ = tr("The cost DB measured %1, not this cluster's %2 × %3: its figures describe "
                        "another device (queries it lacks fall back to the %3 roofline).")
                         .arg(QString::fromStdString(setup->measured->device()))
                         .arg(cluster_->num_gpus())
                         .arg(QString::fromStdString(cluster_->device().name));
    }
  }
  if (costWarning_ != before) emit costSourceChanged();
}

void Session::selectLayout(int index) {
  if (index == selected_) return;
  selected_ = index;
  emit layoutSelected(index);
}

void Session::scheduleReplan() { debounce_.start(); }

QString Session::missingInput() const {
  return !model_     ? tr("No model: choose one in the Model view.")
         : !cluster_ ? tr("No cluster: choose one in the Topology view.")
                     : tr("No expert load: the load in the Model view did not load.");
}

planner::PlanChoices Session::plannedChoices() const {
  // The redundant-slot field keeps its value for the Load balance view's eplb and best; a
  // contiguous or round_robin plan has no replicas, so it plans with none (the CLI asks the user
  // to drop them). With eplb or best the redundant slots also decide which EP sizes are legal.
  planner::PlanChoices choices = choices_;
  if (choices.placement == planner::policy_name(planner::PlacementPolicy::kContiguous) ||
      choices.placement == planner::policy_name(planner::PlacementPolicy::kRoundRobin)) {
    choices.redundancy = {};
  }
  return choices;
}

void Session::replan() {
  debounce_.stop();
  if (!model_ || !cluster_ || !load_) {
    plan_.reset();
    pareto_.clear();
    planInputs_ = PlanInputs{};
    planError_ = missingInput();
    selected_ = -1;
    emit planFinished();
    return;
  }
  // The request moeplan plan builds from the same choices (the load field always holds a load).
  const planner::PlanChoices choices = plannedChoices();
  auto request = planner::make_plan_request(*model_, *cluster_, choices, load_->load, true);
  if (!request) {
    plan_.reset();
    pareto_.clear();
    planInputs_ = PlanInputs{};
    planError_ = errorText(request.error());
    selected_ = -1;
    emit planFinished();
    return;
  }
  const int generation = ++generation_;
  const planner::PlanRequest req = std::move(*request);
  placementFn_ = req.placement;
  PlanInputs inputs;
  inputs.model = std::make_shared<const models::MoeModel>(*model_);
  inputs.cluster = std::make_shared<const planner::Cluster>(*cluster_);
  inputs.choices = choices;
  if (req.placement) {
    inputs.fit =
        planner::policy_fit(*model_, *cluster_, planner::parse_policy(choices.placement).value(),
                            choices.redundancy, req.workload.tokens_per_gpu);
  }
  inputs.placement = req.placement;
  inputs.layerIds = load_->layer_ids;
  inputs.loadSource = load_->load.source;
  inputs.costDb = costDb_;
  auto future = QtConcurrent::run([model = inputs.model, cluster = inputs.cluster, req, generation,
                                   inputs, costs = costDb_.toStdString()]() {
    PlanOutcome out;
    out.generation = generation;
    out.inputs = inputs;
    // The cost source `moeplan plan` sets up: the roofline, or the database's measured costs.
    auto setup = planner::make_cost_setup(*cluster, costs);
    if (!setup) {
      out.error = errorText(setup.error());
      return out;
    }
    auto plan = planner::make_plan(*model, *cluster, setup->costs(), req);
    if (plan) {
      out.plan = std::make_shared<const planner::Plan>(std::move(*plan));
    } else {
      out.error = errorText(plan.error());
      return out;
    }
    if (req.workload.phase == planner::Phase::kDecode) {
      // As moeplan plan --pareto: every batch per GPU with the same request.
      auto pareto = planner::decode_pareto(*model, *cluster, setup->costs(), req,
                                           planner::default_pareto_batches());
      if (pareto) out.pareto = std::move(*pareto);
    }
    return out;
  });
  // A plan still running finishes on its own in the pool; the watcher now follows the new one.
  watcher_.setFuture(future);
  running_ = true;
  emit planStarted();
}

void Session::cancel() {
  debounce_.stop();
  if (!running_) return;
  ++generation_;
  emit planCancelled();
}

void Session::waitForIdle() {
  if (debounce_.isActive()) replan();
  while (running_) {
    watcher_.waitForFinished();
    QCoreApplication::processEvents();
  }
  QCoreApplication::processEvents();
}

void Session::planServing(double ttft_ms, double tpot_ms, int gpu_budget, double rate,
                          double ttft_percentile, std::vector<int> batches) {
  const int generation = ++servingGeneration_;
  if (!model_ || !cluster_ || !load_) {
    ServingOutcome out;
    out.generation = generation;
    out.error = missingInput();
    finishServing(std::move(out));
    return;
  }
  // The request moeplan plan --disagg builds: the plan choices of the session, each pool's
  // phase, tokens and GPU count set by the serving plan itself; the targets are the serving
  // plan's own, not the phase's.
  planner::PlanChoices choices = plannedChoices();
  choices.phase = "decode";
  choices.tokens_per_gpu.reset();
  choices.num_gpus.reset();
  choices.ttft_ms.reset();
  choices.tpot_ms.reset();
  ServingOutcome early;
  early.generation = generation;
  if (!choices.isl || !choices.osl || *choices.osl < 1) {
    early.error =
        tr("Context (input tokens): a serving plan needs the requests' input and output "
           "tokens; expected both set in the Model & workload view");
    finishServing(std::move(early));
    return;
  }
  const int gpus = cluster_->num_gpus();
  if (gpu_budget != 0 && (gpu_budget < 2 || gpu_budget > gpus)) {
    early.error = tr("GPU budget %1: expected 0 (the cluster's %2 GPUs) or 2 to %2")
                      .arg(gpu_budget)
                      .arg(gpus);
    finishServing(std::move(early));
    return;
  }
  auto request = planner::make_plan_request(*model_, *cluster_, choices, load_->load, true);
  if (!request) {
    early.error = errorText(request.error());
    finishServing(std::move(early));
    return;
  }
  auto sweep = planner::sweep_batches(std::move(batches));
  if (!sweep) {
    early.error = errorText(sweep.error());
    finishServing(std::move(early));
    return;
  }
  planner::ServingRequest sreq;
  sreq.base = std::move(*request);
  sreq.gpu_budget = gpu_budget;
  sreq.ttft_target_s = ttft_ms * 1e-3;
  sreq.tpot_target_s = tpot_ms * 1e-3;
  sreq.arrival_rate = rate;
  sreq.ttft_percentile = ttft_percentile / 100.0;
  sreq.decode_batches = std::move(*sweep);
  auto future = QtConcurrent::run([model = std::make_shared<const models::MoeModel>(*model_),
                                   cluster = std::make_shared<const planner::Cluster>(*cluster_),
                                   sreq, generation, costs = costDb_.toStdString()]() {
    ServingOutcome out;
    out.generation = generation;
    auto setup = planner::make_cost_setup(*cluster, costs);
    if (!setup) {
      out.error = errorText(setup.error());
      return out;
    }
    auto plan = planner::plan_serving(*model, *cluster, setup->costs(), sreq);
    if (!plan) {
      out.error = errorText(plan.error());
      return out;
    }
    out.plan = std::make_shared<const planner::ServingPlan>(std::move(*plan));
    if (setup->measured) out.misses = setup->measured->misses();
    return out;
  });
  servingWatcher_.setFuture(future);
  servingRunning_ = true;
  emit servingStarted();
}

void Session::finishServing(ServingOutcome outcome) {
  servingRunning_ = false;
  serving_ = std::move(outcome);
  emit servingFinished();
}

void Session::cancelServing() {
  if (!servingRunning_) return;
  ++servingGeneration_;
  servingRunning_ = false;
  emit servingCancelled();
}

void Session::waitForServing() {
  while (servingRunning_) {
    servingWatcher_.waitForFinished();
    QCoreApplication::processEvents();
  }
  QCoreApplication::processEvents();
}

void Session::onServingDone() {
  ServingOutcome out = servingWatcher_.result();
  if (out.generation != servingGeneration_) return;  // abandoned
  finishServing(std::move(out));
}

void Session::onPlanDone() {
  running_ = false;
  const PlanOutcome out = watcher_.result();
  if (out.generation != generation_) return;  // cancelled
  plan_ = out.plan;
  pareto_ = out.pareto;
  planInputs_ = plan_ ? out.inputs : PlanInputs{};
  planError_ = out.error;
  selected_ = plan_ ? (plan_->recommended >= 0 ? plan_->recommended : 0) : -1;
  emit planFinished();
  emit layoutSelected(selected_);
}

}  // namespace moeplan::gui
