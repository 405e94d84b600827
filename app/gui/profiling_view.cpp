// The Profiling view.
#include "app/gui/profiling_view.hpp"

#include <algorithm>

#include <QCheckBox>
#include <QColor>
#include <QComboBox>
#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "app/gui/charts.hpp"
#include "app/gui/session.hpp"
#include "models/registry.hpp"
#include "planner/costs/cost_setup.hpp"
#include "profiler/harness.hpp"

namespace moeplan::gui {

namespace {

QString text(const std::string& s) { return QString::fromStdString(s); }

QString ms(double seconds) { return QString::number(seconds * 1e3, 'f', 3); }

QString pct(double e) { return QString::number(100.0 * e, 'f', 1) + QStringLiteral("%"); }

/// A validate row's source cell: the prediction's sources, or why the case is not compared.
QString sourceCell(const profiler::MeasuredCase& r, const QString& sources) {
  if (!r.verified) return QObject::tr("VERIFY FAILED: %1").arg(text(r.verify_detail));
  if (!r.stand_in.empty()) return QObject::tr("STAND-IN, not compared: %1").arg(text(r.stand_in));
  return sources;
}

/// validate's pace against the profile's into `out` (a database that cannot be read: the error).
void checkPace(ProfilingOutcome& out, const planner::CostSetup& setup,
               const planner::MachinePace& before, const planner::MachinePace& after) {
  auto pace = profiler::check_profile_pace(setup, before, after);
  if (pace) {
    out.pace = *pace;
  } else if (out.error.isEmpty()) {
    out.error = errorText(pace.error());
  }
}

/// "12 s", "3 min 20 s".
QString duration(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  if (s < 60) return QStringLiteral("%1 s").arg(s);
  return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

PointTableModel::PointTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void PointTableModel::setPoints(std::vector<planner::CostPoint> points) {
  beginResetModel();
  points_ = std::move(points);
  endResetModel();
}

void PointTableModel::append(const planner::CostPoint& point) {
  // A point measured again (profile's second look at unsettled points) replaces its row.
  for (std::size_t i = 0; i < points_.size(); ++i) {
    const auto& q = points_[i];
    if (q.device == point.device && q.backend == point.backend && q.op == point.op &&
        q.dtype == point.dtype && q.shape == point.shape && q.group_size == point.group_size) {
      points_[i] = point;
      const int row = static_cast<int>(i);
      emit dataChanged(index(row, 0), index(row, kNumColumns - 1));
      return;
    }
  }
  const int row = static_cast<int>(points_.size());
  beginInsertRows({}, row, row);
  points_.push_back(point);
  endInsertRows();
}

int PointTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(points_.size());
}

int PointTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kNumColumns;
}

QVariant PointTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const auto& p = points_[static_cast<std::size_t>(index.row())];
  const bool passed = p.disposition == planner::Disposition::kPassed;
  if (role == kValueRole || role == Qt::DisplayRole) {
    const bool display = role == Qt::DisplayRole;
    auto time = [&](double s) -> QVariant {
      if (display) return passed ? ms(s) : QString();
      return s;
    };
    switch (index.column()) {
      case kOp: return text(p.op);
      case kShape: return text(p.shape);
      case kDtype: return text(p.dtype);
      case kGroup: return p.group_size;
      case kMedian: return time(p.median_s);
      case kP10: return time(p.p10_s);
      case kP90: return time(p.p90_s);
      case kReps: return p.repetitions;
      case kDisposition: return text(planner::disposition_name(p.disposition));
      default: return {};
    }
  }
  if (role == Qt::TextAlignmentRole && index.column() >= kGroup && index.column() <= kReps) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ToolTipRole && !p.detail.empty()) return text(p.detail);
  if (role == Qt::ForegroundRole && !passed) return QColor(0xb0, 0x00, 0x20);
  return {};
}

QVariant PointTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kOp: return tr("op");
    case kShape: return tr("shape");
    case kDtype: return tr("dtype");
    case kGroup: return tr("group");
    case kMedian: return tr("median ms");
    case kP10: return tr("p10 ms");
    case kP90: return tr("p90 ms");
    case kReps: return tr("reps");
    case kDisposition: return tr("disposition");
    default: return {};
  }
}

// ---------------------------------------------------------------------------------------------

ProfilingView::ProfilingView(Session* session, QWidget* parent)
    : QWidget(parent), session_(session) {
  pool_.setMaxThreadCount(1);
  auto* outer = new QVBoxLayout(this);

  // The options, named as the CLI's flags (errors name the flag).
  auto* box = new QGroupBox(tr("Measure this machine (in-process ranks as threads)"), this);
  auto* rows = new QVBoxLayout(box);
  auto newRow = [&] {
    auto* r = new QHBoxLayout();
    rows->addLayout(r);
    return r;
  };
  auto addField = [&](QHBoxLayout* r, const QString& label, QWidget* w, int stretch = 0) {
    auto* l = new QLabel(label, box);
    l->setBuddy(w);
    r->addWidget(l);
    r->addWidget(w, stretch);
  };
  auto* common = newRow();
  model_ = new QComboBox(box);
  model_->setEditable(true);
  for (const auto& name : models::bundled_model_names()) model_->addItem(text(name));
  model_->setToolTip(tr("--model: a bundled model or a config.json path"));
  scale_ = new QSpinBox(box);
  scale_->setRange(1, 1024);
  scale_->setValue(8);  // the documented profile (docs/PROFILER.md): predicts within 5% / 15%
  scale_->setToolTip(tr("--scale: hidden and expert widths divided by this"));
  weights_ = new QComboBox(box);
  weights_->addItem(tr("model's own"));
  for (const char* name :
       {"bf16", "fp16", "fp8-block", "fp8-channel", "fp8-tensor", "w4a16", "mxfp4", "nvfp4"}) {
    weights_->addItem(QString::fromLatin1(name));
  }
  weights_->setToolTip(
      tr("--weights: the expert weight format profile measures and validate runs and predicts "
         "(the model's own by default: DeepSeek-V3's fp8 blocks); fp8-channel runs per-token "
         "activations, fp8-tensor static activation scales; w4a16, mxfp4 and nvfp4 are decoded "
         "on load (nvfp4's activations then run at the dtype)"));
  ranks_ = new QSpinBox(box);
  ranks_->setRange(1, 64);
  ranks_->setValue(2);
  ranks_->setToolTip(tr("--ranks: in-process ranks (threads); collectives need at least 2"));
  maxSeconds_ = new QDoubleSpinBox(box);
  maxSeconds_->setRange(0.01, 600.0);
  maxSeconds_->setDecimals(2);
  maxSeconds_->setValue(0.4);
  maxSeconds_->setSuffix(tr(" s"));
  maxSeconds_->setToolTip(
      tr("--max-seconds: timing budget per point (profile) or per case (validate)"));
  addField(common, tr("M&odel:"), model_, 2);
  addField(common, tr("Scale 1/"), scale_);         // S is the Serving view's, c a l e taken here
  addField(common, tr("Weight dtype:"), weights_);  // every letter of it is taken
  addField(common, tr("Ran&ks:"), ranks_);
  addField(common, tr("Max seco&nds:"), maxSeconds_);
  common->addStretch(1);

  auto* prof = newRow();
  output_ = new QLineEdit(QStringLiteral("profile.db"), box);
  output_->setToolTip(tr("--out: the cost database profile writes"));
  addField(prof, tr("O&utput:"), output_, 3);
  auto* browseOut = new QPushButton(tr("…"), box);
  browseOut->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);
  browseOut->setToolTip(tr("Choose the output file"));
  prof->addWidget(browseOut);
  quick_ = new QCheckBox(tr("&Quick"), box);
  quick_->setChecked(false);
  quick_->setToolTip(tr("--quick: a small sweep (powers of two, small caps, short timing)"));
  prof->addWidget(quick_);
  resume_ = new QCheckBox(tr("R&esume"), box);
  resume_->setToolTip(tr("--resume: add to an existing database, measuring only what it lacks"));
  prof->addWidget(resume_);
  maxTokens_ = new QSpinBox(box);
  maxTokens_->setRange(0, 1 << 20);
  maxTokens_->setSpecialValueText(tr("default"));
  maxTokens_->setValue(1024);
  maxTokens_->setToolTip(tr("--max-tokens: GEMM rows up to this (default 4096, quick 512)"));
  addField(prof, tr("Ma&x tokens:"), maxTokens_);
  maxBytes_ = new QSpinBox(box);
  maxBytes_->setRange(0, 1 << 30);
  maxBytes_->setSpecialValueText(tr("default"));
  maxBytes_->setSuffix(tr(" B"));
  maxBytes_->setToolTip(
      tr("--max-bytes: message and elementwise sizes up to this (default 64 MiB, quick 1 MiB)"));
  addField(prof, tr("Max b&ytes:"), maxBytes_);
  coldMib_ = new QSpinBox(box);
  coldMib_->setRange(1, static_cast<int>(profiler::kMaxColdBytes >> 20));
  coldMib_->setValue(static_cast<int>(profiler::kColdBytes >> 20));
  coldMib_->setSuffix(tr(" MiB"));
  coldMib_->setToolTip(
      tr("--cold-mib: each point and pace probe rotates copies of its operands past this many "
         "MiB, so weights are read cold as in a step of a many-layer model (at least %1 times "
         "the CPU's last-level cache; validate reads the profile's rotation)")
          .arg(profiler::kColdCacheRatio));
  addField(prof, tr("Cold rotation:"), coldMib_);
  profileButton_ = new QPushButton(tr("Start profil&ing"), box);
  profileButton_->setToolTip(tr("Measure the kernels and collectives the model's layouts need"));
  prof->addWidget(profileButton_);

  auto* val = newRow();
  validateDb_ = new QLineEdit(box);
  validateDb_->setToolTip(tr("--costs: the cost database validate predicts from"));
  addField(val, tr("&Cost DB:"), validateDb_, 3);
  layouts_ = new QLineEdit(QStringLiteral("all"), box);
  layouts_->setToolTip(tr("--layouts: all, or an EPxTP list such as 2x1,1x2"));
  addField(val, tr("L&ayouts:"), layouts_, 1);
  dispatchers_ = new QLineEdit(QStringLiteral("all"), box);
  dispatchers_->setToolTip(
      tr("--dispatcher: all, or a list of padded_a2a, allgather, a2av, deepep_normal, deepep_ll "
         "(deepep_normal needs the ranks grouped into two or more nodes)"));
  addField(val, tr("&Dispatchers:"), dispatchers_, 1);
  ranksPerNode_ = new QSpinBox(box);
  ranksPerNode_->setRange(0, 64);
  ranksPerNode_->setValue(0);
  ranksPerNode_->setSpecialValueText(tr("one node"));
  ranksPerNode_->setToolTip(
      tr("--ranks-per-node: group the ranks into nodes of this many, emulated on this machine "
         "(deepep_normal's two hops); the predictions are then for local:MxN"));
  addField(val, tr("Node si&ze:"), ranksPerNode_);
  tokens_ = new QLineEdit(QStringLiteral("256,512,1024"), box);
  tokens_->setToolTip(tr("--tokens: global token counts, each divisible by the rank count"));
  addField(val, tr("&Global tokens:"), tokens_, 1);
  auto* partRow = newRow();
  part_ = new QComboBox(box);
  part_->addItems({tr("MoE layer"), tr("attention core"), tr("attention block"),
                   tr("decoder layer (attention block + MoE layer)")});
  part_->setToolTip(
      tr("What validate runs: the sharded MoE layer per layout (the fields above), or on one "
         "rank at full width the attention core, the whole attention block (norms, "
         "projections, RoPE, core) or the whole decoder layer (validate --attention --scope "
         "core|block|layer)"));
  addField(partRow, tr("Part:"), part_, 1);
  contexts_ = new QLineEdit(QStringLiteral("512,2048"), box);
  contexts_->setToolTip(tr("--contexts: context lengths, tokens (prefill one prompt each)"));
  addField(partRow, tr("Contexts:"), contexts_, 1);
  batches_ = new QLineEdit(QStringLiteral("3,12"), box);
  batches_->setToolTip(tr("--batches: decode batch sizes, sequences over each context"));
  addField(partRow, tr("Decode batches:"), batches_, 1);
  const auto syncPart = [this] {
    const bool layer = part_->currentIndex() == 0;
    for (QWidget* w : {static_cast<QWidget*>(layouts_), static_cast<QWidget*>(dispatchers_),
                       static_cast<QWidget*>(ranksPerNode_), static_cast<QWidget*>(tokens_)}) {
      w->setEnabled(layer);
    }
    contexts_->setEnabled(!layer);
    batches_->setEnabled(!layer);
  };
  connect(part_, &QComboBox::currentIndexChanged, this, syncPart);
  syncPart();
  validateButton_ = new QPushButton(tr("Validate no&w"), box);
  validateButton_->setToolTip(
      tr("Run the real sharded layer per layout, dispatcher and token count and compare it with "
         "the planner's prediction from the cost DB and from the roofline"));
  val->addWidget(validateButton_);

  auto* dbRow = newRow();
  auto* openDb = new QPushButton(tr("Open DB…"), box);
  openDb->setToolTip(tr("Show the points of an existing cost database"));
  dbRow->addWidget(openDb);
  useAsCosts_ = new QPushButton(tr("Use as cost source"), box);
  useAsCosts_->setToolTip(
      tr("Plan with the database shown (the Model view's cost source becomes this profile DB, "
         "as moeplan plan --costs FILE)"));
  useAsCosts_->setEnabled(false);
  dbRow->addWidget(useAsCosts_);
  dbRow->addStretch(1);
  outer->addWidget(box);

  auto* row = new QHBoxLayout();
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setFormat(tr("%v / %m"));
  row->addWidget(progress_, 1);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setToolTip(
      tr("Stop after the point in progress; the database keeps every completed "
         "point (Resume continues)"));
  cancel_->setEnabled(false);
  row->addWidget(cancel_);
  outer->addLayout(row);
  status_ = new QLabel(tr("Idle. Profile writes a cost DB; validate compares the planner's "
                          "prediction from it with the measured layer."),
                       this);
  status_->setWordWrap(true);
  outer->addWidget(status_);
  error_ = new QLabel(this);
  error_->setStyleSheet(QStringLiteral("color: #b00020;"));
  error_->setWordWrap(true);
  error_->hide();
  outer->addWidget(error_);

  auto* split = new QSplitter(Qt::Horizontal, this);
  auto* left = new QWidget(split);
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  dbLabel_ = new QLabel(tr("Measured points"), left);
  leftLayout->addWidget(dbLabel_);
  points_ = new PointTableModel(this);
  auto* pointsView = new QTableView(left);
  pointsView->setModel(points_);
  pointsView->verticalHeader()->hide();
  pointsView->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  pointsView->setSelectionBehavior(QAbstractItemView::SelectRows);
  leftLayout->addWidget(pointsView, 1);
  connect(points_, &QAbstractItemModel::rowsInserted, pointsView,
          [pointsView] { pointsView->scrollToBottom(); });
  auto* right = new QWidget(split);
  auto* rightLayout = new QVBoxLayout(right);
  rightLayout->setContentsMargins(0, 0, 0, 0);
  chart_ = new GroupedBarChart(right);
  chart_->setMinimumHeight(200);
  rightLayout->addWidget(chart_, 3);
  validateSummary_ = new QLabel(tr("Predicted vs measured: run validate."), right);
  validateSummary_->setWordWrap(true);
  rightLayout->addWidget(validateSummary_);
  validateTable_ = new QTableWidget(0, 9, right);
  validateTable_->setHorizontalHeaderLabels(
      {tr("layout"), tr("dispatcher"), tr("tokens"), tr("measured ms"), tr("predicted ms"),
       tr("error"), tr("roofline ms"), tr("roofline err"), tr("sources (items)")});
  validateTable_->verticalHeader()->hide();
  validateTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  validateTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  rightLayout->addWidget(validateTable_, 2);
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  outer->addWidget(split, 1);

  connect(profileButton_, &QPushButton::clicked, this, [this] { startProfile(); });
  connect(validateButton_, &QPushButton::clicked, this, [this] { startValidate(); });
  connect(cancel_, &QPushButton::clicked, this, &ProfilingView::cancel);
  connect(browseOut, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Cost database to write"), output_->text(), tr("Cost DB (*.db *.sqlite)"), nullptr,
        QFileDialog::DontConfirmOverwrite);
    if (!path.isEmpty()) output_->setText(path);
  });
  connect(openDb, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a cost database"), QString(),
                                                      tr("Cost DB (*.db *.sqlite);;All (*)"));
    if (!path.isEmpty()) openDatabase(path);
  });
  connect(useAsCosts_, &QPushButton::clicked, this, [this] {
    const QString err = session_->setCostDb(shownDb_);
    showError(err);
    if (err.isEmpty()) status_->setText(tr("Planning with %1 as the cost source.").arg(shownDb_));
  });
  connect(&watcher_, &QFutureWatcher<ProfilingOutcome>::finished, this, &ProfilingView::onDone);
  connect(session_, &Session::modelChanged, this, &ProfilingView::syncModel);
  syncModel();
}

ProfilingView::~ProfilingView() {
  if (stop_) stop_->store(true);
  watcher_.waitForFinished();
}

void ProfilingView::syncModel() {
  if (running_ || !session_->model()) return;
  const QString name = text(session_->model()->name);
  const int i = model_->findText(name);
  if (i >= 0) {
    model_->setCurrentIndex(i);
  } else {
    model_->setEditText(text(session_->model()->source_path));
  }
}

void ProfilingView::showError(const QString& t) {
  error_->setText(t);
  error_->setVisible(!t.isEmpty());
}

void ProfilingView::setRunning(bool on, int total) {
  running_ = on;
  for (QWidget* w : {static_cast<QWidget*>(profileButton_), static_cast<QWidget*>(validateButton_),
                     static_cast<QWidget*>(useAsCosts_), static_cast<QWidget*>(part_)}) {
    w->setEnabled(!on);
  }
  if (!on) useAsCosts_->setEnabled(!shownDb_.isEmpty());
  cancel_->setEnabled(on);
  if (on) {
    progress_->setRange(0, std::max(1, total));
    progress_->setValue(0);
    clock_.start();
  }
}

void ProfilingView::onProgress(int done, int total, const QString& what) {
  if (!running_) return;
  progress_->setRange(0, std::max(1, total));
  progress_->setValue(done);
  const double elapsed = static_cast<double>(clock_.elapsed()) / 1e3;
  const QString eta = done > 0 && done < total
                          ? tr(", about %1 left").arg(duration(elapsed / done * (total - done)))
                          : QString();
  status_->setText(
      tr("%1 / %2 done (%3 elapsed%4): %5").arg(done).arg(total).arg(duration(elapsed), eta, what));
}

std::string ProfilingView::weightsChoice() const {
  return weights_->currentIndex() <= 0 ? std::string() : weights_->currentText().toStdString();
}

bool ProfilingView::startProfile() {
  if (running_) return false;
  showError({});
  profiler::ProfileOptions o;
  o.model = model_->currentText().toStdString();
  o.scale = scale_->value();
  o.quick = quick_->isChecked();
  o.resume = resume_->isChecked();
  o.max_seconds = maxSeconds_->value();
  o.max_tokens = maxTokens_->value();
  o.max_bytes = maxBytes_->value();
  o.cold_mib = coldMib_->value();
  o.out = output_->text().trimmed().toStdString();
  o.weights = weightsChoice();
  const int ranks = ranks_->value();
  o.command = "moeplan-gui profile --model " + o.model + " --scale " + std::to_string(o.scale) +
              (o.weights.empty() ? "" : " --weights " + o.weights) + " --ranks " +
              std::to_string(ranks) + (o.quick ? " --quick" : "") + (o.resume ? " --resume" : "") +
              " --cold-mib " + std::to_string(o.cold_mib) + " --out " + o.out;
  auto req = profiler::make_profile_request(o, ranks);
  if (!req) {
    showError(errorText(req.error()));
    return false;
  }
  if (const Status s = profiler::check_profile_output(*req); !s) {
    showError(errorText(s.error()));
    return false;
  }
  // The table shows the database being written: what it holds already (resume), then each point
  // as its transaction commits.
  shownDb_.clear();
  points_->setPoints({});
  if (o.resume) {
    auto db = planner::CostDb::open(o.out, false);
    if (db) {
      auto pts = (*db)->points();
      if (pts) points_->setPoints(std::move(*pts));
    }
  }
  dbLabel_->setText(tr("Measured points: %1 (being written)").arg(output_->text().trimmed()));
  stop_ = std::make_shared<std::atomic<bool>>(false);
  setRunning(true, 0);
  status_->setText(tr("Profiling %1 on %2 rank(s)…").arg(text(o.model)).arg(ranks));
  auto future = QtConcurrent::run(&pool_, [this, request = *req, ranks, stop = stop_]() {
    ProfilingOutcome out;
    out.path = text(request.out_path);
    Result<profiler::ProfileSummary> sum = Error{"not run"};
    kernels::run_in_process(ranks, [&](kernels::Communicator& world) {
      auto r = profiler::run_profile(
          world, request,
          [this](int done, int total, const std::string& what) {
            QMetaObject::invokeMethod(
                this, [this, done, total, w = text(what)] { onProgress(done, total, w); },
                Qt::QueuedConnection);
          },
          [stop] { return stop->load(); },
          [this](const planner::CostPoint& p) {
            QMetaObject::invokeMethod(
                this, [this, p] { points_->append(p); }, Qt::QueuedConnection);
          });
      if (world.rank() == 0) sum = std::move(r);
    });
    if (sum) {
      out.profile = *sum;
      out.stopped = sum->interrupted;
      out.coldNote = text(profiler::cold_rotation_note(request));
    } else {
      out.error = errorText(sum.error());
    }
    return out;
  });
  watcher_.setFuture(future);
  return true;
}

bool ProfilingView::startValidate() {
  if (running_) return false;
  showError({});
  if (part_->currentIndex() > 0) return startAttentionValidate();
  profiler::ValidateOptions o;
  o.model = model_->currentText().toStdString();
  o.scale = scale_->value();
  o.costs = validateDb_->text().trimmed().toStdString();
  o.layouts = layouts_->text().trimmed().toStdString();
  o.dispatchers = dispatchers_->text().trimmed().toStdString();
  o.tokens = tokens_->text().trimmed().toStdString();
  o.ranks_per_node = ranksPerNode_->value();
  o.max_seconds = maxSeconds_->value();
  o.weights = weightsChoice();
  const int ranks = ranks_->value();
  auto req = profiler::make_validate_request(o, ranks);
  if (!req) {
    showError(errorText(req.error()));
    return false;
  }
  // The cluster `moeplan validate` predicts on: this machine with its ranks, from the profile.
  auto setup = planner::make_cost_setup(req->cluster(), o.costs, req->statistic, true);
  if (!setup) {
    showError(errorText(setup.error()));
    return false;
  }
  // The cases read their weights as cold as the profile's points did.
  const auto cold = profiler::profiled_cold_bytes(*setup);
  if (!cold) {
    showError(errorText(cold.error()));
    return false;
  }
  req->cold_bytes = *cold;
  auto shared = std::make_shared<planner::CostSetup>(std::move(*setup));
  stop_ = std::make_shared<std::atomic<bool>>(false);
  const int total = static_cast<int>(req->cases.size());
  setRunning(true, total);
  status_->setText(tr("Validating %1 case(s) on %2 rank(s)…").arg(total).arg(ranks));
  auto future = QtConcurrent::run(&pool_, [this, request = *req, shared, ranks, stop = stop_]() {
    ProfilingOutcome out;
    out.validate = true;
    out.cases = static_cast<int>(request.cases.size());
    profiler::ValidateRun run;
    kernels::run_in_process(ranks, [&](kernels::Communicator& world) {
      auto mine = profiler::run_validate_paced(
          world, request,
          [this](int done, int n, const std::string& what) {
            QMetaObject::invokeMethod(
                this, [this, done, n, w = text(what)] { onProgress(done, n, w); },
                Qt::QueuedConnection);
          },
          [stop] { return stop->load(); });
      if (world.rank() == 0) run = std::move(mine);
    });
    out.rows = std::move(run.rows);
    out.stopped = static_cast<int>(out.rows.size()) < out.cases;
    if (const Status s = profiler::add_predictions(request, *shared, out.rows, ranks); !s) {
      out.error = errorText(s.error());
    }
    checkPace(out, *shared, run.pace_before, run.pace_after);
    out.misses = shared->measured->misses();
    return out;
  });
  watcher_.setFuture(future);
  return true;
}

bool ProfilingView::startAttentionValidate() {
  if (ranks_->value() != 1) {
    showError(errorText(input_error(
        "ranks", " " + std::to_string(ranks_->value()) +
                     ": the attention core, block and decoder layer run on one rank (the "
                     "profile of one rank predicts them); expected 1")));
    return false;
  }
  profiler::AttentionValidateOptions a;
  a.model = model_->currentText().toStdString();
  a.costs = validateDb_->text().trimmed().toStdString();
  a.contexts = contexts_->text().trimmed().toStdString();
  a.batches = batches_->text().trimmed().toStdString();
  a.max_seconds = maxSeconds_->value();
  const int index = part_->currentIndex();
  a.scope = index == 1 ? "core" : (index == 2 ? "block" : "layer");
  if (a.scope == "layer") a.weights = weightsChoice();
  auto req = profiler::make_attention_validate_request(a);
  if (!req) {
    showError(errorText(req.error()));
    return false;
  }
  auto setup = planner::make_cost_setup(req->cluster, a.costs, req->statistic);
  if (!setup) {
    showError(errorText(setup.error()));
    return false;
  }
  const auto cold = profiler::profiled_cold_bytes(*setup);
  if (!cold) {
    showError(errorText(cold.error()));
    return false;
  }
  req->cold_bytes = *cold;
  auto shared = std::make_shared<planner::CostSetup>(std::move(*setup));
  stop_ = std::make_shared<std::atomic<bool>>(false);
  const int total = static_cast<int>(req->cases.size());
  setRunning(true, total);
  status_->setText(
      tr("Validating the %1 in %2 case(s) on one rank…").arg(part_->currentText()).arg(total));
  auto future = QtConcurrent::run(&pool_, [this, request = *req, shared, stop = stop_]() {
    ProfilingOutcome out;
    out.validate = true;
    out.attention = true;
    out.scope = request.scope;
    out.cases = static_cast<int>(request.cases.size());
    const planner::MachinePace before =
        profiler::measure_pace_alone(request.backend, request.cold_bytes);
    out.attentionRows = profiler::run_attention_validate(
        request,
        [this](int done, int n, const std::string& what) {
          QMetaObject::invokeMethod(
              this, [this, done, n, w = text(what)] { onProgress(done, n, w); },
              Qt::QueuedConnection);
        },
        [stop] { return stop->load(); });
    out.stopped = static_cast<int>(out.attentionRows.size()) < out.cases;
    // A cancelled run does not wait for a second probe.
    const planner::MachinePace after =
        out.stopped ? planner::MachinePace{}
                    : profiler::measure_pace_alone(request.backend, request.cold_bytes);
    if (const Status s = profiler::add_attention_predictions(request, *shared, out.attentionRows);
        !s) {
      out.error = errorText(s.error());
    }
    checkPace(out, *shared, before, after);
    out.misses = shared->measured->misses();
    return out;
  });
  watcher_.setFuture(future);
  return true;
}

void ProfilingView::cancel() {
  if (!running_ || !stop_) return;
  stop_->store(true);
  cancel_->setEnabled(false);
  status_->setText(tr("Stopping after the point in progress…"));
}

void ProfilingView::waitForIdle() {
  while (running_) {
    watcher_.waitForFinished();
    QCoreApplication::processEvents();
  }
  QCoreApplication::processEvents();
}

QString ProfilingView::runExample(const QString& dbPath, int ranks, int scale,
                                  const QString& tokens) {
  ranks_->setValue(ranks);
  scale_->setValue(scale);
  // The documented profile (docs/PROFILER.md) up to the validated token count, not the quick
  // sweep: a quick profile's 0.2 ms samples and 1 MiB cap predicted the layer within a median
  // 11.8% and a worst 30% only; this one within 0.9-6.0% / 3.6-12.4% over four walks
  // (docs/BENCHMARKS.md, issue 18).
  quick_->setChecked(false);
  resume_->setChecked(false);
  maxTokens_->setValue(tokens.toInt());
  maxSeconds_->setValue(0.2);
  output_->setText(dbPath);
  if (!startProfile()) return error_->text();
  waitForIdle();
  if (!outcome_.error.isEmpty()) return outcome_.error;
  validateDb_->setText(dbPath);
  layouts_->setText(QStringLiteral("all"));
  dispatchers_->setText(QStringLiteral("all"));
  tokens_->setText(tokens);
  if (!startValidate()) return error_->text();
  waitForIdle();
  return outcome_.error;
}

bool ProfilingView::openDatabase(const QString& path) {
  if (running_) return false;
  auto db = planner::CostDb::open(path.toStdString(), false);
  Result<std::vector<planner::CostPoint>> pts = Error{""};
  if (db) pts = (*db)->points();
  if (!db || !pts) {
    showError(tr("Cannot read the cost database: %1")
                  .arg((db ? errorText(pts.error()) : errorText(db.error()))));
    return false;
  }
  showError({});
  shownDb_ = path;
  points_->setPoints(std::move(*pts));
  dbLabel_->setText(tr("Measured points: %1 (%2 points)").arg(path).arg(points_->rowCount()));
  validateDb_->setText(path);
  useAsCosts_->setEnabled(true);
  return true;
}

void ProfilingView::onDone() {
  // NOTE: queued progress and point events posted before the result are delivered first.
  QCoreApplication::processEvents();
  outcome_ = watcher_.result();
  const ProfilingOutcome& out = outcome_;
  setRunning(false, 0);
  if (!out.error.isEmpty()) {
    showError(out.error);
    status_->setText(out.validate ? tr("Validate failed.") : tr("Profile failed."));
    emit finished();
    return;
  }
  if (out.validate && out.attention) {
    showAttentionValidate(out);
  } else if (out.validate) {
    showValidate(out);
  } else {
    const auto& s = out.profile;
    const QString path = out.path;
    progress_->setRange(0, std::max(1, s.total));
    progress_->setValue(s.measured + s.skipped + s.incorrect + s.not_supported);
    status_->setText(
        tr("Profile %1: %2 points: %3 measured, %4 kept from before, %5 incorrect, %6 not "
           "supported%7. Device: %8. Machine pace: %9.")
            .arg(path)
            .arg(s.total)
            .arg(s.measured)
            .arg(s.skipped)
            .arg(s.incorrect)
            .arg(s.not_supported)
            .arg(s.interrupted ? tr(" (cancelled: every completed point is kept; Resume "
                                    "continues)")
                               : QString(),
                 text(s.device),
                 (s.pace_end.recorded() ? tr("%1 at the start, %2 at the end (%3)")
                                              .arg(text(profiler::pace_text(s.pace_start)),
                                                   text(profiler::pace_text(s.pace_end)),
                                                   text(profiler::pace_probe_text()))
                                        : tr("%1 at the start (%2)")
                                              .arg(text(profiler::pace_text(s.pace_start)),
                                                   text(profiler::pace_probe_text())))));
    if (s.remeasured > 0) {
      status_->setText(status_->text() +
                       tr(" %1 point(s) had not settled and were measured again after the sweep: "
                          "%2 replaced by the steadier measurement.")
                           .arg(s.remeasured)
                           .arg(s.replaced));
    }
    if (!out.coldNote.isEmpty()) {
      status_->setText(status_->text() + tr(" Note: %1.").arg(out.coldNote));
    }
    if (s.incorrect > 0) {
      showError(tr("%1 point(s) computed a wrong result and are stored as incorrect (the planner "
                   "does not use them).")
                    .arg(s.incorrect));
    }
    // The table already holds every point the file holds (those kept from before, then each
    // one as it committed); it can become the cost source and validate's database.
    shownDb_ = path;
    dbLabel_->setText(tr("Measured points: %1 (%2 points)").arg(path).arg(points_->rowCount()));
    validateDb_->setText(path);
    useAsCosts_->setEnabled(true);
  }
  emit finished();
}

void ProfilingView::showAttentionValidate(const ProfilingOutcome& out) {
  const auto& rows = out.attentionRows;
  validateTable_->clearContents();
  validateTable_->setHorizontalHeaderLabels(
      {tr("phase"), tr("context"), tr("tokens / seqs"), tr("measured ms"), tr("predicted ms"),
       tr("error"), tr("roofline ms"), tr("roofline err"), tr("sources (items)")});
  validateTable_->setRowCount(static_cast<int>(rows.size()));
  QStringList categories;
  std::vector<std::vector<double>> values(3);
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const auto& r = rows[static_cast<std::size_t>(i)];
    const QString phase = r.c.decode ? tr("decode") : tr("prefill");
    const QStringList cells = {phase,
                               QString::number(r.c.context),
                               QString::number(r.c.tokens),
                               ms(r.measured_s),
                               ms(r.predicted.seconds),
                               pct(profiler::relative_error(r.predicted.seconds, r.measured_s)),
                               ms(r.roofline.seconds),
                               pct(profiler::relative_error(r.roofline.seconds, r.measured_s)),
                               sourceCell(r, text(r.predicted.source))};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c >= 1 && c <= 7) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      validateTable_->setItem(i, c, item);
    }
    categories << (r.c.decode
                       ? QStringLiteral("%1 %2×%3").arg(phase).arg(r.c.tokens).arg(r.c.context)
                       : QStringLiteral("%1 %2").arg(phase).arg(r.c.context));
    values[0].push_back(r.measured_s * 1e3);
    values[1].push_back(r.predicted.seconds * 1e3);
    values[2].push_back(r.roofline.seconds * 1e3);
  }
  const QString part = out.scope == profiler::AttentionScope::kCore
                           ? tr("Attention core")
                           : (out.scope == profiler::AttentionScope::kBlock ? tr("Attention block")
                                                                            : tr("Decoder layer"));
  chart_->setData(tr("%1 time per case: measured vs predicted").arg(part), categories,
                  {tr("measured"), tr("predicted (cost DB)"), tr("roofline")}, values,
                  tr("phase, sequences × context"), tr("ms"));
  const auto sum = profiler::summarize(rows);
  showValidateSummary(out, sum, rows.size(), tr("%1, one rank. ").arg(part),
                      tr("An op did not match its reference (VERIFY FAILED rows)."));
}

void ProfilingView::showValidate(const ProfilingOutcome& out) {
  const auto& rows = out.rows;
  validateTable_->setHorizontalHeaderLabels(
      {tr("layout"), tr("dispatcher"), tr("tokens"), tr("measured ms"), tr("predicted ms"),
       tr("error"), tr("roofline ms"), tr("roofline err"), tr("sources (items)")});
  validateTable_->setRowCount(static_cast<int>(rows.size()));
  QStringList categories;
  std::vector<std::vector<double>> values(3);
  // Short bar labels: the token count goes to the axis title when every case has the same.
  const bool oneTokenCount = std::all_of(
      rows.begin(), rows.end(),
      [&](const profiler::ValidateRow& r) { return r.c.tokens == rows.front().c.tokens; });
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const auto& r = rows[static_cast<std::size_t>(i)];
    const QString name = text(r.c.layout.short_name());
    const QString disp = text(kernels::dispatcher_name(r.c.layout.dispatcher));
    const QStringList cells = {name,
                               disp,
                               QString::number(r.c.tokens),
                               ms(r.measured_s),
                               ms(r.predicted.total()),
                               pct(profiler::relative_error(r.predicted.total(), r.measured_s)),
                               ms(r.roofline.total()),
                               pct(profiler::relative_error(r.roofline.total(), r.measured_s)),
                               sourceCell(r, text(profiler::source_summary(r.predicted)))};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c >= 2 && c <= 7) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      validateTable_->setItem(i, c, item);
    }
    categories << (oneTokenCount ? QStringLiteral("%1 %2").arg(name, disp)
                                 : QStringLiteral("%1 %2 %3").arg(name, disp).arg(r.c.tokens));
    values[0].push_back(r.measured_s * 1e3);
    values[1].push_back(r.predicted.total() * 1e3);
    values[2].push_back(r.roofline.total() * 1e3);
  }
  chart_->setData(tr("Layer time per case: measured vs predicted"), categories,
                  {tr("measured"), tr("predicted (cost DB)"), tr("roofline")}, values,
                  oneTokenCount && !rows.empty()
                      ? tr("layout, dispatcher (%1 tokens)").arg(rows.front().c.tokens)
                      : tr("layout, dispatcher, tokens"),
                  tr("ms"));
  const auto sum = profiler::summarize(rows);
  showValidateSummary(out, sum, rows.size(), QString(),
                      tr("A layer did not match the dense reference (VERIFY FAILED rows)."));
}

void ProfilingView::showValidateSummary(const ProfilingOutcome& out,
                                        const profiler::ValidateSummary& sum, std::size_t rows,
                                        const QString& prefix, const QString& verifyFailed) {
  const QString cancelled =
      out.stopped ? tr(", cancelled after %1 of %2").arg(rows).arg(out.cases) : QString();
  QString summary =
      sum.compared > 0
          ? prefix + tr("Cost DB: median |error| %1, worst %2; roofline: median |error| %3, worst "
                        "%4 (%5 cases%6).")
                         .arg(pct(sum.median_abs_error), pct(sum.worst_abs_error),
                              pct(sum.roofline_median_abs_error), pct(sum.roofline_worst_abs_error))
                         .arg(sum.compared)
                         .arg(cancelled)
          : prefix + tr("No case compared (%1 cases%2).").arg(rows).arg(cancelled);
  if (sum.stand_in_cases > 0) {
    summary += tr(" %1 case(s) left out: the backend ran a stand-in for one of their kernels "
                  "(STAND-IN rows), so their time is not the kernels'.")
                   .arg(sum.stand_in_cases);
  }
  if (sum.remeasured > 0) {
    summary += tr(" %1 case(s) had not settled and were measured again after the others: %2 "
                  "replaced by the steadier measurement.")
                   .arg(sum.remeasured)
                   .arg(sum.replaced);
  }
  if (!out.misses.empty()) {
    summary += tr(" %1 kind(s) of query missed the cost database and used the roofline.")
                   .arg(out.misses.size());
  }
  QString pace = text(profiler::describe_pace(out.pace));
  if (!pace.isEmpty()) pace[0] = pace[0].toUpper();
  summary += QLatin1Char(' ') + pace + QLatin1Char('.');
  validateSummary_->setText(summary);
  QString tip;
  for (const auto& m : out.misses) tip += text(m) + QLatin1Char('\n');
  validateSummary_->setToolTip(tip.trimmed());
  status_->setText(out.stopped ? tr("Validate cancelled; the cases done are shown.")
                               : tr("Validate finished: %1 case(s).").arg(rows));
  if (!sum.all_verified) showError(verifyFailed);
}

}  // namespace moeplan::gui
