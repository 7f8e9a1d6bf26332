import { LabIcon } from '@jupyterlab/ui-components';

import trainSvg from '../style/icons/train.svg';

/** The Training Jobs icon: three replicas joined to a chief. */
export const trainIcon = new LabIcon({
  name: 'vertex-train:train',
  svgstr: trainSvg
});
