# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
