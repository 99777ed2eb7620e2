package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VacuumMode says which kind of vacuum runs.
// +kubebuilder:validation:Enum=Lazy;Full
type VacuumMode string

const (
	// VacuumModeLazy is a plain VACUUM: dead tuples are removed in place, tables stay online.
	VacuumModeLazy VacuumMode = "Lazy"
	// VacuumModeFull is VACUUM FULL: each table is rewritten compactly and its indexes rebuilt.
	VacuumModeFull VacuumMode = "Full"
)

// VacuumSpec is what one execution does: shared by VacuumPolicy (as the template of its runs)
// and VacuumRun (resolved, for one run).
type VacuumSpec struct {
	// target is what to clean: a volume holding the engine's data directory (an offline
	// run), or a running database server reached through a Service (an online run).
	// +required
	Target Target `json:"target"` //nolint:kubeapilinter // requiredfields: the target's own CEL rule refuses {} (exactly one form must be set)

	// mode is Lazy (VACUUM) or Full (VACUUM FULL).
	// +kubebuilder:default=Lazy
	// +optional
	Mode VacuumMode `json:"mode,omitempty"`

	// throttle limits how hard the vacuum works, for the whole run (all workers share it).
	// +kubebuilder:default={}
	// +optional
	Throttle Throttle `json:"throttle,omitzero"` //nolint:kubeapilinter // optionalfields: the API server defaults it to {} and then each field

	// ringSize is the vacuum's private ring of buffers: 0 = none (use the shared pool),
	// otherwise 128Ki to 16Gi. Absent = 2Mi for a volume target; for a server target it
	// is sent (as BUFFER_USAGE_LIMIT, PostgreSQL 16 and later) only when written.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('0')) == 0 || (quantity(string(self)).compareTo(quantity('128Ki')) >= 0 && quantity(string(self)).compareTo(quantity('16Gi')) <= 0)",message="ringSize must be 0 or between 128Ki and 16Gi"
	// +optional
	RingSize *resource.Quantity `json:"ringSize,omitempty"`

	// bufferPoolSize is the runner's buffer pool, 1Mi to 1Ti; absent = 128Mi. A server
	// target refuses it: the server's own buffers are used.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0 && quantity(string(self)).compareTo(quantity('1Ti')) <= 0",message="bufferPoolSize must be between 1Mi and 1Ti"
	// +optional
	BufferPoolSize *resource.Quantity `json:"bufferPoolSize,omitempty"`

	// parallelism is the number of tables vacuumed at once, 1 to 64.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Parallelism int32 `json:"parallelism,omitempty"`

	// indexWorkers is the number of indexes of one table vacuumed at once by a Lazy run,
	// 0 to 64; 0 means the table's own worker does them one by one. Full ignores it:
	// VACUUM FULL builds a table's indexes one after another.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	IndexWorkers int32 `json:"indexWorkers,omitempty"` //nolint:kubeapilinter // optionalfields: the default is 0, so absent and 0 are the same

	// maintenanceWorkMem bounds each worker's dead-tuple memory (Lazy) or each index
	// build's sort memory (Full), 1Mi to 1Ti. When it fills, the indexes are vacuumed and
	// the scan goes on, so a small value means more index passes.
	// +kubebuilder:default="64Mi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0 && quantity(string(self)).compareTo(quantity('1Ti')) <= 0",message="maintenanceWorkMem must be between 1Mi and 1Ti"
	// +optional
	MaintenanceWorkMem *resource.Quantity `json:"maintenanceWorkMem,omitempty"`

	// truncate gives empty pages at the end of a table back to the filesystem (Lazy only).
	// Absent = true for a volume target; for a server target it is sent only when written,
	// else the server's own setting applies.
	// +optional
	Truncate *bool `json:"truncate,omitempty"`

	// minDeadTuplePercent skips tables whose dead tuples are below this share, 0 to 100.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MinDeadTuplePercent int32 `json:"minDeadTuplePercent,omitempty"` //nolint:kubeapilinter // optionalfields: the default is 0, so absent and 0 are the same

	// tableOverrides give single tables their own throttle; fields left out inherit the
	// run's throttle.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=table
	// +optional
	TableOverrides []TableOverride `json:"tableOverrides,omitempty"`

	// runner sets the runner pod's image, resources, scheduling and user IDs.
	// +optional
	Runner RunnerSpec `json:"runner,omitempty"` //nolint:kubeapilinter // optionalfields: an empty runner means every default, as an absent one does

	// activeDeadlineSeconds bounds the run's duration, counted from its first pod start and
	// across attempts; past it the run fails with reason DeadlineExceeded. Absent = none.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer so absent (the default) stays apart from a value; the YAML is the same

	// podStartTimeoutSeconds bounds how long a run may wait, once it holds its volume, for
	// its runner pod to start (the quiesced app to stop, the image to be pulled, the pod to
	// be scheduled and its volume attached); past it the run fails with reason
	// PodNotStarted, naming the pod's waiting reason, and its app is restored.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	PodStartTimeoutSeconds *int64 `json:"podStartTimeoutSeconds,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer so absent (the default) stays apart from a value; the YAML is the same

	// allowCrashRecovery lets the runner run crash recovery on a data directory that needs
	// it although its last opener was not an earlier attempt of this run (an app that
	// crashed, say); without it such a run fails with reason NeedsRecovery and the volume
	// is left as it was.
	// +kubebuilder:default=false
	// +optional
	AllowCrashRecovery bool `json:"allowCrashRecovery,omitempty"` //nolint:kubeapilinter // optionalfields: false is the default, so absent and false are the same

	// backoffLimit is how many failed attempts are retried before the run fails, 0 to 10.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +optional
	BackoffLimit int32 `json:"backoffLimit"` //nolint:kubeapilinter // defaults: no omitempty, so a Go client's 0 is sent and not defaulted to 2
}

// Target names what to clean: exactly one of a volume (persistentVolumeClaim, offline) or a
// server (online), and the tables.
// +kubebuilder:validation:XValidation:rule="has(self.persistentVolumeClaim) != has(self.server)",message="target must set exactly one of persistentVolumeClaim (an offline run) and server (an online run)"
// +kubebuilder:validation:XValidation:rule="!has(self.server) || !has(self.quiesce)",message="target.quiesce cannot be used with target.server: an online run vacuums a server beside its traffic and stops nothing"
// +kubebuilder:validation:XValidation:rule="!has(self.server) || !has(self.subPath)",message="target.subPath cannot be used with target.server: it names a directory inside a volume"
type Target struct {
	// persistentVolumeClaim is the claim, in the same namespace, holding the data directory
	// (an offline run). It cannot be changed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="target.persistentVolumeClaim is immutable"
	// +optional
	PersistentVolumeClaim string `json:"persistentVolumeClaim,omitempty"` //nolint:kubeapilinter // optionalfields: minLength 1, so the empty string is never a value

	// server is a running database server (the engine server or PostgreSQL) reached through
	// a Service in the same namespace, vacuumed through SQL beside its traffic (an online
	// run). It cannot be changed.
	// +optional
	Server *ServerTarget `json:"server,omitempty"` //nolint:kubeapilinter // optionalfields: nil is the other form (a volume), which CEL rules and the controller test with has()

	// subPath is the data directory inside the volume; empty = the volume's root.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="target.subPath must be a relative path without '..'"
	// +optional
	SubPath string `json:"subPath,omitempty"` //nolint:kubeapilinter // optionalfields: empty is the volume's root, as absent is

	// tables to vacuum; empty = every table.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Tables []string `json:"tables,omitempty"`

	// quiesce names the application holding the volume, scaled to 0 while the runner
	// holds it and restored afterwards, whatever the outcome.
	// +optional
	Quiesce *QuiesceTarget `json:"quiesce,omitempty"` //nolint:kubeapilinter // optionalfields: nil means nothing to stop, which CEL rules test with has()
}

// ServerTarget is a database server behind a Service of the run's namespace. The operator
// resolves the Service through its EndpointSlices to one ready address, which it passes to
// the runner; cluster DNS is never used.
type ServerTarget struct {
	// service is the name of the Service in front of the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Service string `json:"service,omitempty"`

	// port is the Service's port (not the pod's), mapped to the endpoint's target port;
	// absent = 5432.
	// +kubebuilder:default=5432
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer so absent (the default) stays apart from a value; the YAML is the same

	// database is the database whose tables are vacuumed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Database string `json:"database,omitempty"`

	// credentialsSecret is the Secret, in the run's namespace, holding the role and password
	// the runner connects with. Creating a run or policy that names it needs permission to
	// get it (an admission policy shipped with the operator checks that), and only its two
	// keys are mounted into the runner pod; the manager never reads it.
	// +required
	CredentialsSecret CredentialsSecret `json:"credentialsSecret,omitzero"`

	// tls says how the connection is encrypted and the server verified; absent = Require.
	// +optional
	TLS *ServerTLS `json:"tls,omitempty"`
}

// CredentialsSecret names a Secret and the keys of a role's name and password in it.
type CredentialsSecret struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
	// usernameKey is the key holding the role's name; absent = username.
	// +kubebuilder:default=username
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	UsernameKey string `json:"usernameKey,omitempty"`
	// passwordKey is the key holding the password; absent = password.
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	PasswordKey string `json:"passwordKey,omitempty"`
}

// TLSMode is libpq's sslmode, without the modes that may fall back to cleartext.
// +kubebuilder:validation:Enum=Disable;Require;VerifyCA;VerifyFull
type TLSMode string

// TLS modes of a server target.
const (
	// TLSDisable connects without TLS.
	TLSDisable TLSMode = "Disable"
	// TLSRequire encrypts but does not verify the server's certificate.
	TLSRequire TLSMode = "Require"
	// TLSVerifyCA encrypts and checks the certificate against caSecret.
	TLSVerifyCA TLSMode = "VerifyCA"
	// TLSVerifyFull is VerifyCA plus a check that the certificate names the address
	// connected to.
	TLSVerifyFull TLSMode = "VerifyFull"
)

// ServerTLS is the connection's TLS.
// +kubebuilder:validation:XValidation:rule="!(self.mode in ['VerifyCA', 'VerifyFull']) || has(self.caSecret)",message="target.server.tls.caSecret is required when tls.mode is VerifyCA or VerifyFull"
type ServerTLS struct {
	// mode is Disable, Require, VerifyCA or VerifyFull; absent = Require. Only a verified
	// server (VerifyCA, VerifyFull) is ever sent a cleartext password; otherwise the
	// runner answers SCRAM-SHA-256 only.
	// +kubebuilder:default=Require
	// +optional
	Mode TLSMode `json:"mode,omitempty"`
	// caSecret is a Secret in the run's namespace whose key ca.crt holds the CA bundle the
	// server's certificate is checked against.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	CASecret string `json:"caSecret,omitempty"`
}

// CAKey is the key of a server target's caSecret holding the CA bundle.
const CAKey = "ca.crt"

// QuiesceTarget is a workload in the same namespace.
type QuiesceTarget struct {
	// kind is Deployment or StatefulSet.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet
	// +required
	Kind string `json:"kind,omitempty"`
	// name is the workload's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
}

// TableOverride gives one table its own throttle.
type TableOverride struct {
	// table is the table's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Table string `json:"table,omitempty"`
	// throttle fields set here replace the run's; the others inherit them.
	// +required
	Throttle ThrottleOverride `json:"throttle"` //nolint:kubeapilinter // requiredfields: {} is a valid override (inherit all); required so an entry always says it
}

// RunnerSpec sets the runner pod. Everything else about the pod's security is the
// operator's: it always passes the PodSecurity "restricted" profile.
type RunnerSpec struct {
	// image is the vacuum-runner image; absent = the manager's (--runner-image). Any other
	// image must be one the operator's admin allows (--allowed-runner-images), else the run
	// fails with reason ImageNotAllowed: an image is code run against the volume.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"` //nolint:kubeapilinter // optionalfields: empty means the manager's image, as absent does
	// imagePullPolicy is Always, IfNotPresent or Never.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"` //nolint:kubeapilinter // optionalfields: an enum without the empty string
	// resources of the runner container; memory defaults to bufferPoolSize +
	// parallelism x maintenanceWorkMem + 64Mi, as request and limit.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"` //nolint:kubeapilinter // optionalfields: empty resources mean the computed ones, as absent do
	// nodeSelector constrains the nodes the pod may run on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// tolerations of the pod.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// affinity of the pod.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// podSecurityContext sets the pod's user and group IDs (at least 1).
	// +optional
	PodSecurityContext *RunnerPodSecurityContext `json:"podSecurityContext,omitempty"`
	RunnerPodOptions   `json:",inline"`
}

// RunnerPodSecurityContext is the part of the pod's security context a user may choose.
type RunnerPodSecurityContext struct {
	// runAsUser is the UID of the runner; absent = the image's (which must be non-root).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 2147483647",message="podSecurityContext.runAsUser must be at most 2147483647"
	// +optional
	RunAsUser *int64 `json:"runAsUser,omitempty"` //nolint:kubeapilinter // optionalfields: copied to the pod's *int64 as it is
	// runAsGroup is the primary GID of the runner.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 2147483647",message="podSecurityContext.runAsGroup must be at most 2147483647"
	// +optional
	RunAsGroup *int64 `json:"runAsGroup,omitempty"` //nolint:kubeapilinter // optionalfields: copied to the pod's *int64 as it is
	// fsGroup owns the mounted volume so the runner can write it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 2147483647",message="podSecurityContext.fsGroup must be at most 2147483647"
	// +optional
	FSGroup *int64 `json:"fsGroup,omitempty"` //nolint:kubeapilinter // optionalfields: copied to the pod's *int64 as it is
	// fsGroupChangePolicy is OnRootMismatch or Always.
	// +kubebuilder:validation:Enum=OnRootMismatch;Always
	// +optional
	FSGroupChangePolicy *corev1.PodFSGroupChangePolicy `json:"fsGroupChangePolicy,omitempty"` //nolint:kubeapilinter // optionalfields: copied to the pod's pointer as it is
	// supplementalGroups are extra GIDs of the runner.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self.all(g, g <= 2147483647)",message="podSecurityContext.supplementalGroups must each be at most 2147483647"
	// +listType=atomic
	// +optional
	SupplementalGroups []int64 `json:"supplementalGroups,omitempty"`
}

// Throttle limits a vacuum. Sustained cost units per second never exceed costLimit /
// costDelay; the byte-rate limits apply too, and the most restrictive wins.
// +kubebuilder:validation:XValidation:rule="!has(self.adaptive) || (has(self.costDelay) && duration(self.costDelay) > duration('0s')) || has(self.maxReadBytesPerSecond) || has(self.maxWriteBytesPerSecond) || has(self.maxWALBytesPerSecond)",message="throttle.adaptive needs a static ceiling to scale: costDelay above 0 or a max*BytesPerSecond"
type Throttle struct {
	// costDelay is the sleep owed each time costLimit is spent, 0 to 100ms; 0 = no cost
	// throttling.
	// +kubebuilder:default="2ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0ms') && duration(self) <= duration('100ms')",message="throttle.costDelay must be a duration between 0 and 100ms"
	// +optional
	CostDelay *metav1.Duration `json:"costDelay,omitempty"` //nolint:kubeapilinter // nodurations: PostgreSQL's own vocabulary (vacuum_cost_delay = '2ms'), sub-second
	// costLimit is the cost budget between sleeps, 1 to 10000.
	// +kubebuilder:default=200
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	CostLimit *int32 `json:"costLimit,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer like its siblings, so an override's absent field inherits
	// pageHitCost is charged for a page found in the buffer pool, 0 to 10000.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	PageHitCost *int32 `json:"pageHitCost,omitempty"`
	// pageMissCost is charged for a page read from storage, 0 to 10000.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	PageMissCost *int32 `json:"pageMissCost,omitempty"`
	// pageDirtyCost is charged for a page the vacuum dirties, 0 to 10000.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	PageDirtyCost *int32 `json:"pageDirtyCost,omitempty"`
	// maxReadBytesPerSecond caps bytes read from the tables per second; absent or 0 = no limit.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) >= 0",message="throttle.maxReadBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"
	// +optional
	MaxReadBytesPerSecond *resource.Quantity `json:"maxReadBytesPerSecond,omitempty"`
	// maxWriteBytesPerSecond caps bytes written to the tables per second; absent or 0 = no limit.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) >= 0",message="throttle.maxWriteBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"
	// +optional
	MaxWriteBytesPerSecond *resource.Quantity `json:"maxWriteBytesPerSecond,omitempty"`
	// maxWALBytesPerSecond caps WAL bytes written per second; absent or 0 = no limit.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) >= 0",message="throttle.maxWALBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"
	// +optional
	MaxWALBytesPerSecond *resource.Quantity `json:"maxWALBytesPerSecond,omitempty"`
	// adaptive makes the rate follow the foreground's latency and the standbys' lag, with
	// the limits above as its ceiling (an online run only).
	// +optional
	Adaptive *AdaptiveThrottle `json:"adaptive,omitempty"`
}

// ThrottleOverride is a Throttle without defaults: every field left out inherits the run's.
// Its byte rates are checked at admission like the policy's; their maxLength keeps that
// CEL within the CRD's validation cost budget across the 64 overrides allowed.
type ThrottleOverride struct {
	// costDelay is the sleep owed each time costLimit is spent, 0 to 100ms.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0ms') && duration(self) <= duration('100ms')",message="tableOverrides throttle.costDelay must be a duration between 0 and 100ms"
	// +optional
	CostDelay *metav1.Duration `json:"costDelay,omitempty"` //nolint:kubeapilinter // nodurations: PostgreSQL's own vocabulary (vacuum_cost_delay = '2ms'), sub-second
	// costLimit is the cost budget between sleeps, 1 to 10000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	CostLimit *int32 `json:"costLimit,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer like its siblings, so an override's absent field inherits
	// pageHitCost is charged for a page found in the buffer pool, 0 to 10000.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	PageHitCost *int32 `json:"pageHitCost,omitempty"`
	// pageMissCost is charged for a page read from storage, 0 to 10000.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	PageMissCost *int32 `json:"pageMissCost,omitempty"`
	// pageDirtyCost is charged for a page the vacuum dirties, 0 to 10000.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	PageDirtyCost *int32 `json:"pageDirtyCost,omitempty"`
	// maxReadBytesPerSecond caps bytes read per second, a quantity of at most 32 characters;
	// 0 = no limit.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) >= 0",message="tableOverrides throttle.maxReadBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"
	// +optional
	MaxReadBytesPerSecond *resource.Quantity `json:"maxReadBytesPerSecond,omitempty"`
	// maxWriteBytesPerSecond caps bytes written per second, a quantity of at most 32 characters;
	// 0 = no limit.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) >= 0",message="tableOverrides throttle.maxWriteBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"
	// +optional
	MaxWriteBytesPerSecond *resource.Quantity `json:"maxWriteBytesPerSecond,omitempty"`
	// maxWALBytesPerSecond caps WAL bytes per second, a quantity of at most 32 characters;
	// 0 = no limit.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) >= 0",message="tableOverrides throttle.maxWALBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"
	// +optional
	MaxWALBytesPerSecond *resource.Quantity `json:"maxWALBytesPerSecond,omitempty"`
	// adaptive replaces the run's adaptive targets for this table (an online run only).
	// +optional
	Adaptive *AdaptiveTargets `json:"adaptive,omitempty"`
}
