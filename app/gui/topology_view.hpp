// The Cluster topology view: the cluster graph drawn with QGraphicsView (nodes, GPUs, NVSwitch
// domains, NICs, switches; links coloured by bandwidth) and editors for the compact cluster
// form. Edits go through planner::parse_cluster; an invalid edit shows the parser's reason.
#pragma once

#include <QWidget>
#include <string>

class QComboBox;
class QDoubleSpinBox;
class QGraphicsScene;
class QGraphicsView;
class QLabel;
class QPushButton;
class QSpinBox;

namespace moeplan::gui {

class Session;

class TopologyView : public QWidget {
  Q_OBJECT

 public:
  explicit TopologyView(Session* session, QWidget* parent = nullptr);

  QSpinBox* nodesSpin() const { return nodes_; }
  QSpinBox* gpusPerNodeSpin() const { return gpusPerNode_; }
  QSpinBox* nvlinkDomainSpin() const { return domain_; }
  QDoubleSpinBox* nvlinkBandwidthSpin() const { return nvBw_; }
  QDoubleSpinBox* nvlinkLatencySpin() const { return nvLat_; }
  QSpinBox* nicsSpin() const { return nics_; }
  QDoubleSpinBox* nicBandwidthSpin() const { return nicBw_; }
  QDoubleSpinBox* networkLatencySpin() const { return netLat_; }
  QComboBox* networkCombo() const { return network_; }
  /// The bundled clusters; shows the current cluster's name (and "edited, not saved").
  QComboBox* clusterCombo() const { return bundled_; }
  QLabel* errorLabel() const { return error_; }
  QGraphicsScene* scene() const { return scene_; }
  QGraphicsView* graphicsView() const { return view_; }
  /// The plan's error when there is no plan (e.g. no legal layout on this cluster's GPUs).
  QLabel* planErrorLabel() const { return planError_; }
  /// The view's scale (1 = actual size); zoomBy multiplies it, fitAll fits the whole cluster.
  double zoom() const;
  void zoomBy(double factor);
  void fitAll();
  /// Opens a cluster JSON by path or bundled name; errors show in the view.
  bool openCluster(const QString& nameOrPath);
  /// Writes the current cluster JSON; errors show in the view.
  bool saveCluster(const QString& path);
  /// Most nodes drawn; larger clusters draw their first kMaxDrawnNodes nodes.
  static constexpr int kMaxDrawnNodes = 32;

 signals:
  /// A cluster was opened by name or path (not emitted for edits).
  void clusterOpened(const QString& nameOrPath);
  /// A cluster was saved; `message` says where.
  void saved(const QString& message);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private slots:
  void onEdited();
  void onOpen();
  void onSave();

 private:
  void loadEditors();
  void redraw();
  void showError(const QString& text);

  Session* session_;
  QComboBox* bundled_ = nullptr;
  QComboBox* device_ = nullptr;
  QSpinBox* nodes_ = nullptr;
  QSpinBox* gpusPerNode_ = nullptr;
  QSpinBox* domain_ = nullptr;
  QDoubleSpinBox* nvBw_ = nullptr;
  QDoubleSpinBox* nvLat_ = nullptr;
  QSpinBox* nics_ = nullptr;
  QDoubleSpinBox* nicBw_ = nullptr;
  QDoubleSpinBox* netLat_ = nullptr;
  QComboBox* network_ = nullptr;
  QDoubleSpinBox* oversub_ = nullptr;
  QComboBox* colourBy_ = nullptr;
  QLabel* error_ = nullptr;
  QLabel* summary_ = nullptr;
  QLabel* planError_ = nullptr;
  bool fitted_ = true;  ///< the view follows its size (until the user zooms)
  QLabel* legend_ = nullptr;
  QGraphicsScene* scene_ = nullptr;
  QGraphicsView* view_ = nullptr;
  QList<QWidget*> editors_;
  bool loading_ = false;
  std::string editedFrom_;    ///< the name of the cluster opened
  std::string openedSource_;  ///< its file
  std::string unsavedDescription_;
  bool unsaved_ = false;  ///< edited since it was opened or saved
};

}  // namespace moeplan::gui
