-- trainctl's own record (TRAINCTL_STORE), beside Temporal's databases on the same server.
CREATE DATABASE trainctl OWNER temporal;
