#include "series_math.hpp"

#include <algorithm>
#include <cmath>

namespace tandem::gui {

QList<QPointF> smooth(const QList<QPointF>& points, double weight) {
  if (weight <= 0) return points;
  weight = std::min(weight, 0.999999);
  QList<QPointF> out;
  out.reserve(points.size());
  double last = 0;
  double debias = 1;  // w^n
  for (const QPointF& p : points) {
    if (!std::isfinite(p.y())) {
      out.push_back(p);
      continue;
    }
    last = last * weight + (1 - weight) * p.y();
    debias *= weight;
    out.push_back({p.x(), last / (1 - debias)});
  }
  return out;
}

QList<QPointF> decimate(const QList<QPointF>& points, int max_points) {
  max_points = std::max(max_points, 4);
  const qsizetype n = points.size();
  if (n <= max_points) return points;
  const qsizetype buckets = (max_points - 2) / 2;
  QList<QPointF> out;
  out.reserve(max_points);
  out.push_back(points.front());
  const double per_bucket = static_cast<double>(n - 2) / static_cast<double>(buckets);
  for (qsizetype b = 0; b < buckets; ++b) {
    const qsizetype begin = 1 + static_cast<qsizetype>(std::floor(b * per_bucket));
    const qsizetype end =
        std::min(n - 1, 1 + static_cast<qsizetype>(std::floor((b + 1) * per_bucket)));
    if (begin >= end) continue;
    qsizetype lo = begin, hi = begin;
    for (qsizetype i = begin + 1; i < end; ++i) {
      if (points[i].y() < points[lo].y()) lo = i;
      if (points[i].y() > points[hi].y()) hi = i;
    }
    if (lo == hi) {
      out.push_back(points[lo]);
    } else {
      out.push_back(points[std::min(lo, hi)]);
      out.push_back(points[std::max(lo, hi)]);
    }
  }
  out.push_back(points.back());
  return out;
}

}  // namespace tandem::gui
