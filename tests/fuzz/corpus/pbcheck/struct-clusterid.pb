 

	ClusterID
Kubernetes