package tribprom

import "github.com/prometheus/client_golang/prometheus"

// Misname gives three of c's descriptors names that break Prometheus's
// naming rules, for the test that shows the lint catches them: a gauge
// ending in _sum, a counter without _total, and a camelCase name.
func Misname(c *Collector) {
	c.groupLag = prometheus.NewDesc("tributary_group_lag_sum", "Badly named group lag.", groupLabels, nil)
	c.errorsTotal = prometheus.NewDesc("tributary_describe_errors", "Badly named error counter.", nil, nil)
	c.retained = prometheus.NewDesc("tributary_partition_retainedRecords", "Badly named retained records.", partitionLabels, nil)
}
