// The cluster topology view.
#include "app/gui/topology_view.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsView>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "app/gui/session.hpp"
#include "models/file_io.hpp"
#include "planner/topology/device_spec.hpp"

namespace moeplan::gui {

namespace {

constexpr double kGpuW = 46.0, kGpuH = 30.0, kNodePad = 10.0, kNodeGap = 34.0;
constexpr double kNodeH = 150.0;

QSpinBox* intSpin(int lo, int hi, const QString& suffix = {}) {
  auto* s = new QSpinBox();
  s->setRange(lo, hi);
  s->setSuffix(suffix);
  s->setKeyboardTracking(false);
  return s;
}

QDoubleSpinBox* doubleSpin(double lo, double hi, int decimals, const QString& suffix) {
  auto* s = new QDoubleSpinBox();
  s->setRange(lo, hi);
  s->setDecimals(decimals);
  s->setSuffix(suffix);
  s->setKeyboardTracking(false);
  return s;
}

/// Link colour by bandwidth rank among the cluster's distinct bandwidths (fastest first).
QColor bandwidthColour(int rank, int count) {
  static const QColor kRamp[] = {QColor(0x1a, 0x98, 0x50), QColor(0x31, 0x6b, 0xc4),
                                 QColor(0xe0, 0x8a, 0x14), QColor(0xc4, 0x31, 0x31),
                                 QColor(0x7b, 0x3f, 0xa0)};
  (void)count;
  return kRamp[std::min(rank, 4)];
}

QString gbps(double bytesPerSecond) {
  return QString::number(bytesPerSecond / 1e9, 'f', bytesPerSecond < 1e10 ? 1 : 0) + " GB/s";
}

}  // namespace

TopologyView::TopologyView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* outer = new QHBoxLayout(this);
  auto* splitter = new QSplitter(Qt::Horizontal, this);
  outer->addWidget(splitter);

  auto* panel = new QWidget(splitter);
  auto* pl = new QVBoxLayout(panel);
  auto* fileRow = new QHBoxLayout();
  bundled_ = new QComboBox(panel);
  for (const auto& n : planner::bundled_cluster_names())
    bundled_->addItem(QString::fromStdString(n));
  bundled_->setToolTip(tr("Bundled clusters (resources/clusters)"));
  fileRow->addWidget(bundled_, 1);
  auto* open = new QPushButton(tr("&Open…"), panel);
  auto* save = new QPushButton(tr("Save…"), panel);
  open->setToolTip(tr("Open a cluster JSON"));
  save->setToolTip(tr("Save the edited cluster as JSON"));
  fileRow->addWidget(open);
  fileRow->addWidget(save);
  pl->addLayout(fileRow);

  auto* form = new QFormLayout();
  device_ = new QComboBox(panel);
  for (const auto& n : planner::bundled_device_names()) device_->addItem(QString::fromStdString(n));
  // From 0: the parser says why 0 is not a cluster (a spin box would silently revert it).
  nodes_ = intSpin(0, 4096);
  gpusPerNode_ = intSpin(0, 144);
  domain_ = intSpin(1, 4096, tr(" GPUs"));
  nvBw_ = doubleSpin(0.1, 100000.0, 1, tr(" GB/s"));
  nvLat_ = doubleSpin(0.0, 1000.0, 2, tr(" µs"));
  nics_ = intSpin(1, 144);
  nicBw_ = doubleSpin(0.1, 100000.0, 1, tr(" GB/s"));
  netLat_ = doubleSpin(0.0, 1000.0, 2, tr(" µs"));
  network_ = new QComboBox(panel);
  network_->addItems({QStringLiteral("rail_optimized"), QStringLiteral("fat_tree")});
  oversub_ = doubleSpin(1.0, 64.0, 2, QStringLiteral(" : 1"));
  form->addRow(tr("Devi&ce:"), device_);
  form->addRow(tr("&Nodes:"), nodes_);
  form->addRow(tr("&GPUs per node:"), gpusPerNode_);
  form->addRow(tr("NVLink &domain:"), domain_);
  form->addRow(tr("NVLin&k bandwidth:"), nvBw_);
  form->addRow(tr("NVLink latenc&y:"), nvLat_);
  form->addRow(tr("N&ICs per node:"), nics_);
  form->addRow(tr("NIC b&andwidth:"), nicBw_);
  form->addRow(tr("Network lat&ency:"), netLat_);
  form->addRow(tr("Net&work:"), network_);
  form->addRow(tr("Overs&ubscription:"), oversub_);
  pl->addLayout(form);
  editors_ = {device_, nodes_, gpusPerNode_, domain_,  nvBw_,   nvLat_,
              nics_,   nicBw_, netLat_,      network_, oversub_};

  error_ = new QLabel(panel);
  error_->setStyleSheet(QStringLiteral("color: #b00020;"));
  error_->setWordWrap(true);
  error_->hide();
  pl->addWidget(error_);
  summary_ = new QLabel(panel);
  summary_->setWordWrap(true);
  pl->addWidget(summary_);
  planError_ = new QLabel(panel);
  planError_->setStyleSheet(QStringLiteral("color: #b00020;"));
  planError_->setWordWrap(true);
  planError_->hide();
  pl->addWidget(planError_);
  auto* colourRow = new QHBoxLayout();
  colourRow->addWidget(new QLabel(tr("Colour GPUs by:"), panel));
  colourBy_ = new QComboBox(panel);
  colourBy_->addItems({tr("EP rank"), tr("TP rank"), tr("node")});
  colourRow->addWidget(colourBy_, 1);
  pl->addLayout(colourRow);
  legend_ = new QLabel(panel);
  legend_->setWordWrap(true);
  legend_->setTextFormat(Qt::RichText);
  pl->addWidget(legend_);
  pl->addStretch(1);
  panel->setMinimumWidth(300);
  panel->setMaximumWidth(380);

  auto* right = new QWidget(splitter);
  auto* rl = new QVBoxLayout(right);
  rl->setContentsMargins(0, 0, 0, 0);
  auto* zoomRow = new QHBoxLayout();
  auto* zoomIn = new QPushButton(tr("Zoom in"), right);
  auto* zoomOut = new QPushButton(tr("Zoom out"), right);
  auto* fit = new QPushButton(tr("Fit"), right);
  zoomIn->setShortcut(QKeySequence::ZoomIn);
  zoomOut->setShortcut(QKeySequence::ZoomOut);
  fit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
  zoomIn->setToolTip(tr("Zoom in (Ctrl++, or Ctrl + mouse wheel); drag to pan"));
  zoomOut->setToolTip(tr("Zoom out (Ctrl+-, or Ctrl + mouse wheel)"));
  fit->setToolTip(tr("Fit the whole cluster in the view (Ctrl+0)"));
  zoomRow->addWidget(zoomIn);
  zoomRow->addWidget(zoomOut);
  zoomRow->addWidget(fit);
  zoomRow->addStretch(1);
  rl->addLayout(zoomRow);
  scene_ = new QGraphicsScene(this);
  view_ = new QGraphicsView(scene_, right);
  rl->addWidget(view_, 1);
  view_->setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
  view_->viewport()->installEventFilter(this);
  connect(zoomIn, &QPushButton::clicked, this, [this] { zoomBy(1.25); });
  connect(zoomOut, &QPushButton::clicked, this, [this] { zoomBy(0.8); });
  connect(fit, &QPushButton::clicked, this, &TopologyView::fitAll);
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setDragMode(QGraphicsView::ScrollHandDrag);
  view_->setFocusPolicy(Qt::StrongFocus);
  splitter->setStretchFactor(1, 1);

  connect(bundled_, &QComboBox::activated, this,
          [this](int i) { openCluster(bundled_->itemText(i)); });
  connect(open, &QPushButton::clicked, this, &TopologyView::onOpen);
  connect(save, &QPushButton::clicked, this, &TopologyView::onSave);
  for (auto* s : {nodes_, gpusPerNode_, domain_, nics_}) {
    connect(s, &QSpinBox::valueChanged, this, &TopologyView::onEdited);
  }
  for (auto* s : {nvBw_, nvLat_, nicBw_, netLat_, oversub_}) {
    connect(s, &QDoubleSpinBox::valueChanged, this, &TopologyView::onEdited);
  }
  connect(network_, &QComboBox::currentIndexChanged, this, &TopologyView::onEdited);
  connect(device_, &QComboBox::currentIndexChanged, this, &TopologyView::onEdited);
  connect(colourBy_, &QComboBox::currentIndexChanged, this, &TopologyView::redraw);
  connect(session_, &Session::clusterChanged, this, [this] {
    loadEditors();
    redraw();
  });
  connect(session_, &Session::layoutSelected, this, &TopologyView::redraw);
  // A plan error about the cluster (no legal layout on its GPU count) shows here too.
  connect(session_, &Session::planFinished, this, [this] {
    planError_->setText(session_->plan() ? QString()
                                         : tr("No plan: %1").arg(session_->planError()));
    planError_->setVisible(!session_->plan() && !session_->planError().isEmpty());
  });
  loadEditors();
  redraw();
}

bool TopologyView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == view_->viewport() && event->type() == QEvent::Resize && fitted_) {
    view_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
  }
  if (watched == view_->viewport() && event->type() == QEvent::Wheel) {
    auto* wheel = static_cast<QWheelEvent*>(event);
    if (wheel->modifiers() & Qt::ControlModifier) {
      zoomBy(wheel->angleDelta().y() > 0 ? 1.25 : 0.8);
      return true;
    }
  }
  return QWidget::eventFilter(watched, event);
}

double TopologyView::zoom() const { return view_->transform().m11(); }

void TopologyView::zoomBy(double factor) {
  // Between a tenth of the fitted scale and 8 × actual size.
  const double next = zoom() * factor;
  if ((factor > 1.0 && next > 8.0) || (factor < 1.0 && next < 0.02)) return;
  fitted_ = false;
  view_->scale(factor, factor);
}

void TopologyView::fitAll() {
  fitted_ = true;
  view_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
}

void TopologyView::showError(const QString& text) {
  error_->setText(text);
  error_->setVisible(!text.isEmpty());
}

bool TopologyView::openCluster(const QString& nameOrPath) {
  const QString err = session_->setClusterName(nameOrPath);
  showError(err);
  if (err.isEmpty()) {
    editedFrom_ = session_->cluster()->name();
    openedSource_ = session_->cluster()->info().source;
    unsaved_ = false;
    loadEditors();
    emit clusterOpened(nameOrPath);
  }
  return err.isEmpty();
}

bool TopologyView::saveCluster(const QString& path) {
  QString file = path;
  if (QFileInfo(file).suffix().isEmpty()) file += QStringLiteral(".json");
  nlohmann::json j = session_->clusterJson();
  // An edit is saved under the file's own name; an unedited cluster keeps its name.
  if (unsaved_) j["name"] = QFileInfo(file).completeBaseName().toStdString();
  const Status s = write_file_atomic(file.toStdString(), j.dump(2) + "\n");
  if (!s.ok()) {
    showError(errorText(s.error()));
    return false;
  }
  showError(QString());
  // The plan now names the saved file (exports record it and its fingerprint).
  if (unsaved_ && !openCluster(file)) return false;
  emit saved(tr("Saved the cluster to %1").arg(file));
  return true;
}

void TopologyView::onOpen() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open a cluster JSON"), QString(), tr("JSON (*.json)"));
  if (!path.isEmpty()) openCluster(path);
}

void TopologyView::onSave() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Save the cluster JSON"), QString(),
                                                    tr("JSON (*.json)"));
  if (!path.isEmpty()) saveCluster(path);
}

void TopologyView::loadEditors() {
  const nlohmann::json& j = session_->clusterJson();
  loading_ = true;
  // The planner's own reading of the compact form: the same keys, defaults and checks.
  const auto compact_form = planner::read_compact_cluster(j, "cluster");
  const bool compact = compact_form.ok();
  for (QWidget* w : editors_) w->setEnabled(compact);
  if (compact) {
    const planner::CompactCluster& c = *compact_form;
    device_->setCurrentText(QString::fromStdString(c.device));
    nodes_->setValue(c.nodes);
    gpusPerNode_->setValue(c.gpus_per_node);
    domain_->setValue(c.nvlink_domain_gpus);
    nvBw_->setValue(c.nvlink_bandwidth_gb_per_s);
    nvLat_->setValue(c.nvlink_latency_us);
    nics_->setValue(c.nics_per_node);
    nicBw_->setValue(c.nic_bandwidth_gb_per_s);
    netLat_->setValue(c.network_latency_us);
    network_->setCurrentText(
        QString::fromStdString(c.network == "none" ? std::string("rail_optimized") : c.network));
    oversub_->setValue(c.oversubscription);
  }
  if (const auto& c = session_->cluster()) {
    // A bundled cluster by its name; an edited or opened file by its name and state.
    const QString name = QString::fromStdString(c->name());
    const int i = unsaved_ ? -1 : bundled_->findText(name);
    {
      const QSignalBlocker block(bundled_);
      bundled_->setCurrentIndex(i);
      bundled_->setPlaceholderText(
          unsaved_ ? tr("%1 (edited, not saved)").arg(name)
                   : tr("%1 (%2)").arg(name, QString::fromStdString(c->info().source)));
    }
    const auto& info = c->info();
    summary_->setText(
        tr("<b>%1</b> (%2): %3 GPUs × %4 (%5 HBM), %6 nodes, NVLink domains of %7 GPUs.%8")
            .arg(QString::fromStdString(info.name), QString::fromStdString(info.form))
            .arg(c->num_gpus())
            .arg(QString::fromStdString(info.device.display_name), formatGiB(info.device.hbm_bytes))
            .arg(info.num_nodes)
            .arg(info.nvlink_domain_gpus)
            .arg(compact ? QString()
                         : tr(" The explicit form is edited in its file; open it again after "
                              "editing.")));
  }
  loading_ = false;
}

void TopologyView::onEdited() {
  if (loading_) return;
  const nlohmann::json& current = session_->clusterJson();
  auto read = planner::read_compact_cluster(current, "cluster");
  if (!read) return;  // the explicit form is edited in its file
  planner::CompactCluster c = *read;
  c.device = device_->currentText().toStdString();
  c.nodes = nodes_->value();
  c.gpus_per_node = gpusPerNode_->value();
  c.nvlink_domain_gpus = domain_->value();
  c.nvlink_bandwidth_gb_per_s = nvBw_->value();
  c.nvlink_latency_us = nvLat_->value();
  if (c.network != "none" || c.nodes * c.gpus_per_node > c.nvlink_domain_gpus) {
    c.nics_per_node = nics_->value();
    c.nic_bandwidth_gb_per_s = nicBw_->value();
    c.network_latency_us = netLat_->value();
    c.network = network_->currentText().toStdString();
    c.oversubscription = oversub_->value();
  }
  nlohmann::json j = planner::compact_cluster_json(c, current);
  // An edited cluster is no longer the one opened: it says so in its name, description and
  // source until it is saved under a name of its own.
  if (!editedFrom_.empty() && session_->cluster()) {
    const std::string from = editedFrom_;
    if (!unsaved_) {
      unsavedDescription_ = "Edited in moeplan-gui from " + from;
      const std::string before = session_->cluster()->info().description;
      if (!before.empty()) unsavedDescription_ += " (" + before + ")";
    }
    j["name"] = from + "-edited";
    j["description"] = unsavedDescription_;
  }
  const std::string source = "edited from " + openedSource_ + ", not saved";
  const QString err = session_->setClusterJson(j, QString::fromStdString(source));
  if (err.isEmpty()) {
    unsaved_ = true;
    loadEditors();
  }
  showError(err.isEmpty() ? QString() : tr("Edit not applied: %1").arg(err));
}

namespace {

/// Where each vertex of a cluster graph is drawn: GPUs by node in a grid, NVSwitches and NICs over
/// their GPUs, leaf or rail switches in a row below, and the switches above them (a fat tree's
/// spine) in a second row.
struct TopologyLayout {
  int gpusPerNode = 1;
  int numNodes = 0;
  int drawnNodes = 0;
  int perRow = 1;
  double nodeW = 0.0;
  std::vector<QPointF> pos;
  std::vector<bool> placed;
  std::vector<std::vector<std::size_t>> nbrs;

  QPointF nodeOrigin(int node) const {
    return QPointF((node % perRow) * (nodeW + kNodeGap), (node / perRow) * (kNodeH + kNodeGap));
  }
};

TopologyLayout layoutTopology(const planner::Cluster& cluster) {
  const auto& g = cluster.graph();
  TopologyLayout t;
  t.gpusPerNode = std::max(1, cluster.info().gpus_per_node);
  const int gpn = t.gpusPerNode;
  t.numNodes = (cluster.num_gpus() + gpn - 1) / gpn;
  t.drawnNodes = std::min(t.numNodes, TopologyView::kMaxDrawnNodes);
  t.nodeW = gpn * kGpuW + 2 * kNodePad;
  // Nodes in a grid about 1.8 times wider than tall.
  t.perRow = std::clamp(static_cast<int>(std::ceil(std::sqrt(
                            t.drawnNodes * 1.8 * (kNodeH + kNodeGap) / (t.nodeW + kNodeGap)))),
                        1, std::max(1, t.drawnNodes));
  const int numRows = (t.drawnNodes + t.perRow - 1) / t.perRow;
  const double bottom = numRows * (kNodeH + kNodeGap);
  const auto nv = static_cast<std::size_t>(boost::num_vertices(g));
  t.pos.assign(nv, QPointF());
  t.placed.assign(nv, false);
  t.nbrs.assign(nv, {});
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    t.nbrs[boost::source(*e, g)].push_back(boost::target(*e, g));
  }
  for (std::size_t v = 0; v < nv; ++v) {
    const auto& vi = g[v];
    if (vi.kind != planner::VertexKind::kGpu) continue;
    const int node = vi.gpu_index / gpn;
    if (node >= t.drawnNodes) continue;
    t.pos[v] =
        t.nodeOrigin(node) + QPointF(kNodePad + (vi.gpu_index % gpn) * kGpuW + kGpuW / 2, 70);
    t.placed[v] = true;
  }
  // A vertex of `kind` goes to the mean x of its placed neighbours (of another kind unless
  // `sameKind`): `dy` below them, or at row `y` when `absoluteY`.
  auto placeFromNeighbours = [&](planner::VertexKind kind, double dy, bool absoluteY, double y,
                                 bool sameKind) {
    std::vector<std::size_t> now;
    for (std::size_t v = 0; v < nv; ++v) {
      if (g[v].kind != kind || t.placed[v]) continue;
      double sx = 0, sy = 0;
      int n = 0;
      for (std::size_t u : t.nbrs[v]) {
        if (t.placed[u] && (sameKind || g[u].kind != kind)) {
          sx += t.pos[u].x();
          sy += t.pos[u].y();
          ++n;
        }
      }
      if (n == 0) continue;
      t.pos[v] = QPointF(sx / n, absoluteY ? y : sy / n + dy);
      now.push_back(v);
    }
    for (std::size_t v : now) t.placed[v] = true;
  };
  placeFromNeighbours(planner::VertexKind::kNvSwitch, -48, false, 0, false);
  placeFromNeighbours(planner::VertexKind::kNic, 48, false, 0, false);
  // Rail or leaf switches under the NICs; then the switches only other switches reach (a fat
  // tree's spine) one row further down.
  placeFromNeighbours(planner::VertexKind::kSwitch, 0, true, bottom + 20, false);
  placeFromNeighbours(planner::VertexKind::kSwitch, 0, true, bottom + 90, true);
  // Switches of one row that would overlap spread evenly over the grid's width, in x order.
  const double gridW = std::min(t.drawnNodes, t.perRow) * (t.nodeW + kNodeGap) - kNodeGap;
  for (double rowY : {bottom + 20, bottom + 90}) {
    std::vector<std::size_t> row;
    for (std::size_t v = 0; v < nv; ++v) {
      if (t.placed[v] && g[v].kind == planner::VertexKind::kSwitch && t.pos[v].y() == rowY) {
        row.push_back(v);
      }
    }
    std::sort(row.begin(), row.end(), [&](auto a, auto b) { return t.pos[a].x() < t.pos[b].x(); });
    bool overlap = false;
    for (std::size_t i = 1; i < row.size(); ++i)
      overlap |= t.pos[row[i]].x() - t.pos[row[i - 1]].x() < 76;
    if (!overlap) continue;
    const double step = std::max(76.0, gridW / static_cast<double>(row.size()));
    const double x0 = gridW / 2 - step * (static_cast<double>(row.size()) - 1) / 2;
    for (std::size_t i = 0; i < row.size(); ++i)
      t.pos[row[i]].setX(x0 + step * static_cast<double>(i));
  }
  return t;
}

/// EP and TP rank of every GPU in `layout` (-1: unused).
struct RankColours {
  std::vector<int> ep, tp;
  int numEp = 1, numTp = 1;
};

RankColours rankColours(const planner::LayoutCost* lc, int numGpus) {
  RankColours r;
  r.ep.assign(static_cast<std::size_t>(numGpus), -1);
  r.tp.assign(r.ep.size(), -1);
  if (lc == nullptr || lc->layout.num_gpus > numGpus) return r;
  r.numEp = lc->layout.ep_size;
  r.numTp = lc->layout.tp_size;
  for (const auto& grp : lc->layout.ep_groups()) {
    for (std::size_t i = 0; i < grp.size(); ++i)
      r.ep[static_cast<std::size_t>(grp[i])] = static_cast<int>(i);
  }
  for (const auto& grp : lc->layout.tp_groups()) {
    for (std::size_t i = 0; i < grp.size(); ++i)
      r.tp[static_cast<std::size_t>(grp[i])] = static_cast<int>(i);
  }
  return r;
}

/// One vertex of the drawn graph: a GPU coloured by `by` (0 EP rank, 1 TP rank, 2 node), an
/// NVSwitch spanning its GPUs, a NIC or a switch.
void drawVertex(QGraphicsScene* scene, int by, const planner::TopologyGraph& g,
                const TopologyLayout& t, const RankColours& ranks, std::size_t v) {
  const auto& vi = g[v];
  const QPointF at = t.pos[v];
  QRectF box;
  QColor fill;
  QString text;
  switch (vi.kind) {
    case planner::VertexKind::kGpu: {
      box = QRectF(-kGpuW / 2 + 3, -kGpuH / 2, kGpuW - 6, kGpuH);
      const auto gi = static_cast<std::size_t>(vi.gpu_index);
      const int rank = by == 0   ? ranks.ep[gi]
                       : by == 1 ? ranks.tp[gi]
                                 : vi.gpu_index / t.gpusPerNode;
      const int count = by == 0 ? ranks.numEp : by == 1 ? ranks.numTp : t.numNodes;
      fill = rank < 0 ? QColor(0xdd, 0xdd, 0xdd)
                      : QColor::fromHsv((rank * 300 / std::max(1, count)) % 360, 110, 245);
      text = ranks.ep[gi] >= 0 ? QStringLiteral("E%1\nT%2").arg(ranks.ep[gi]).arg(ranks.tp[gi])
                               : QStringLiteral("G%1").arg(vi.gpu_index);
      break;
    }
    case planner::VertexKind::kNvSwitch: {
      double lo = at.x(), hi = at.x();
      for (std::size_t u : t.nbrs[v]) {
        if (t.placed[u]) {
          lo = std::min(lo, t.pos[u].x());
          hi = std::max(hi, t.pos[u].x());
        }
      }
      box = QRectF(lo - at.x() - kGpuW / 2 + 3, -10, hi - lo + kGpuW - 6, 20);
      fill = QColor(0xc8, 0xe6, 0xc9);
      text = QStringLiteral("%1 (NVLink domain)").arg(QString::fromStdString(vi.name));
      break;
    }
    case planner::VertexKind::kNic:
      box = QRectF(-14, -9, 28, 18);
      fill = QColor(0xbb, 0xde, 0xfb);
      text = QStringLiteral("NIC");
      break;
    case planner::VertexKind::kSwitch:
      box = QRectF(-34, -12, 68, 24);
      fill = QColor(0xff, 0xe0, 0xb2);
      text = QString::fromStdString(vi.name);
      break;
  }
  auto* item = scene->addRect(box, QPen(QColor(0x44, 0x44, 0x44)), QBrush(fill));
  item->setPos(at);
  item->setToolTip(
      QString::fromStdString(vi.name + " (" + planner::vertex_kind_name(vi.kind) + ")"));
  auto* label = new QGraphicsSimpleTextItem(text, item);
  QFont f = label->font();
  f.setPointSizeF(vi.kind == planner::VertexKind::kGpu ? 7.0 : 7.5);
  label->setFont(f);
  const QRectF lr = label->boundingRect();
  label->setPos(box.center() - QPointF(lr.width() / 2, lr.height() / 2));
}

}  // namespace

void TopologyView::redraw() {
  scene_->clear();
  const auto& cluster = session_->cluster();
  if (!cluster) return;
  const auto& g = cluster->graph();
  const TopologyLayout t = layoutTopology(*cluster);

  // Distinct bandwidths, fastest first, for colours and the legend.
  std::set<double, std::greater<>> bws;
  for (int i = 0; i < cluster->num_links(); ++i) bws.insert(cluster->link(i).bandwidth);
  auto bwRank = [&](double bw) {
    return static_cast<int>(std::distance(bws.begin(), bws.find(bw)));
  };

  // Node frames.
  for (int node = 0; node < t.drawnNodes; ++node) {
    const QPointF o = t.nodeOrigin(node);
    auto* frame = scene_->addRect(QRectF(o, QSizeF(t.nodeW, kNodeH)),
                                  QPen(QColor(0x99, 0x99, 0x99)), QBrush(QColor(0xf6, 0xf6, 0xf6)));
    frame->setZValue(-2);
    auto* label = scene_->addSimpleText(tr("node %1").arg(node));
    label->setPos(o + QPointF(4, kNodeH - 18));
    label->setBrush(QColor(0x55, 0x55, 0x55));
  }
  // Links (one line per cable: the direction with the lower source vertex).
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const auto s = boost::source(*e, g), d = boost::target(*e, g);
    if (s > d || !t.placed[s] || !t.placed[d]) continue;
    const double bw = g[*e].bandwidth;
    QPen pen(bandwidthColour(bwRank(bw), static_cast<int>(bws.size())));
    pen.setWidthF(std::clamp(std::log10(bw / 1e9 + 1.0), 0.6, 3.0));
    auto* line = scene_->addLine(QLineF(t.pos[s], t.pos[d]), pen);
    line->setZValue(-1);
    line->setToolTip(tr("%1 ↔ %2: %3, %4 µs")
                         .arg(QString::fromStdString(g[s].name), QString::fromStdString(g[d].name),
                              gbps(bw), QString::number(g[*e].latency * 1e6, 'f', 2)));
  }
  // Vertices, GPUs coloured by the selected layout's ranks.
  const planner::LayoutCost* lc = session_->selectedLayoutCost();
  const RankColours ranks = rankColours(lc, cluster->num_gpus());
  for (std::size_t v = 0; v < t.placed.size(); ++v) {
    if (t.placed[v]) drawVertex(scene_, colourBy_->currentIndex(), g, t, ranks, v);
  }
  // Legend.
  QString legend = tr("<b>Links</b> (per direction):");
  for (double bw : bws) {
    legend += QStringLiteral("<br><span style='color:%1'>■■■</span> %2")
                  .arg(bandwidthColour(bwRank(bw), static_cast<int>(bws.size())).name(), gbps(bw));
  }
  if (lc != nullptr) {
    legend += tr("<br><b>GPUs</b>: E = EP rank, T = TP rank of %1 %2 %3; grey: unused.")
                  .arg(QString::fromStdString(lc->layout.shape_name()),
                       QString::fromStdString(planner::dispatcher_name(lc->layout.dispatcher)),
                       QString::fromStdString(planner::mapping_name(lc->layout.mapping)));
  }
  if (t.drawnNodes < t.numNodes) {
    legend += tr("<br>Showing the first %1 of %2 nodes.").arg(t.drawnNodes).arg(t.numNodes);
  }
  legend_->setText(legend);
  scene_->setSceneRect(scene_->itemsBoundingRect().adjusted(-10, -10, 10, 10));
  if (fitted_) view_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
}

}  // namespace moeplan::gui
